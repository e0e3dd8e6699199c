package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

// Run-queue tuning (see WithRunQueue).
const (
	runTau      = 2 * time.Second // smoothing of the healthy running count
	runHeadroom = 2.0             // the bound is this many times the healthy count
	runGrow     = 1.25            // per period while requests wait and the signals have room
	runRoom     = 0.8             // ... below this load
	runBusy     = 0.5             // below this load (nothing shed or degraded) the queue is off
)

// runBound learns the run queue's bound: twice the number of requests
// running at once while the server is busy but healthy, scaled to the
// load at target, never below a floor; it grows while requests wait at a
// full bound and the signals have room, up to the requests present.
type runBound struct {
	mean  float64 // requests running at once while healthy, scaled to load 1
	limit float64 // the learned bound; 0 = none yet
	floor float64
}

// runIn is one period's input to the run-queue stage.
type runIn struct {
	period   time.Duration // the control period
	counting bool          // the queue counted its slots during the period
	running  int64         // requests holding a slot now
	waiting  int64         // requests waiting for one now
	load     float64
	shedding bool
	degraded bool
	flood    bool
}

// step returns the bound to publish: runOff while the server is not busy,
// runCount while busy with nothing learned yet, else the bound.
func (b *runBound) step(in runIn) int64 {
	if in.counting && !in.shedding && !in.flood && in.load >= runBusy && in.load <= 1 {
		// Busy but not overloaded (degraded is fine: the level rises
		// below target): what runs at once now, scaled to the load at
		// target.
		est := float64(in.running) / in.load
		if b.mean == 0 {
			b.mean = est
		} else {
			b.mean = smooth.Toward(b.mean, est, smooth.Alpha(in.period, runTau))
		}
	}
	if b.mean > 0 {
		b.limit = max(b.limit, runHeadroom*b.mean, b.floor)
		if in.waiting > 0 && float64(in.running) >= b.limit-1 && !in.shedding && in.load < runRoom {
			// Requests wait at a full bound while the signals have room:
			// the bound, not the server, is short (a slower dependency
			// needs more requests in flight, not fewer). It grows by a
			// quarter, but never past the requests that want a slot:
			// more would not run one more, and a wait that lasts (a
			// waiter whose caller stalls) would grow it without end.
			b.limit = max(b.limit, min(b.limit*runGrow, float64(in.running+in.waiting)))
			b.mean = max(b.mean, b.limit/runHeadroom)
		} else {
			// Back towards the learned bound.
			b.limit = max(runHeadroom*b.mean, b.floor, b.limit*0.95)
		}
	}
	switch {
	case !(in.shedding || in.degraded || in.flood || in.load >= runBusy):
		return runOff
	case b.mean > 0:
		return int64(math.Ceil(b.limit))
	default:
		return runCount
	}
}

// Standing-queue tuning (CoDel's view of the run queue).
const (
	runStanding  = 10 * time.Millisecond  // a wait longer than this at two Steps in a row: a standing queue
	runShortWait = 100 * time.Millisecond // the longest wait while the queue stands
)

// standing tells a standing run queue from a burst, as CoDel does: when
// the oldest waiter had waited more than runStanding at two Steps in a
// row (about CoDel's 100 ms interval), the queue is not draining. Then it
// serves the newest waiter first (adaptive LIFO, as Facebook's servers
// do: the requests that run are the ones with time left, and a new
// request does not wait behind a backlog), and a wait lasts runShortWait
// at most instead of WithRunQueue's: the waiters left behind are
// rejected as Overloaded while their callers can still retry elsewhere.
// The queue is FIFO again, with the long wait, once a Step finds it
// draining.
type standing struct {
	oldest int64 // ns the oldest waiter had waited after the last Step
	n      int   // consecutive Steps with a standing queue
}

// step returns the dispatch order and the longest wait for the next
// period, given the configured wait.
func (s *standing) step(configured time.Duration) (lifo bool, wait time.Duration) {
	if s.oldest > int64(runStanding) {
		s.n++
	} else {
		s.n = 0
	}
	if s.n >= 2 {
		return true, min(configured, runShortWait)
	}
	return false, configured
}
