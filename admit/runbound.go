package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

// needBound is the bound the capacity's need allows when the work is
// mostly on the CPU (a need of at most twice the cores: step): twice the need
// (lifted while requests wait with room), never below the cores. Twice,
// not once: an open-loop server's requests in service fluctuate around
// the need, and a bound at the need itself would hold the excess in the
// run queue, where a wait longer than the run queue allows (500 ms by
// default, 100 ms while a queue stands) is refused. Measured on one core,
// 20 ms CPU-bound requests, naive clients (tools/loopback/lab, medians of
// 3): a bound of one kept p50 at 2× overload at 2.9× the unloaded one but
// served 94% at 0.9× (waits expired) and 0.84 of capacity at 2×; a bound
// of two, 5.1×, 100% and 0.90; the bound learned from the running count
// alone (about ten), 9.5×, 94% and 0.81.
// 64 cores of 1 s CPU-bound requests need about 60 (bound 120). A need
// far above the cores is work that waits on something else (a dependency,
// the network), which sharing the CPU does not slow: the running count's
// bound stands, and the waits stay where the signals see them (a
// dependency's pool) rather than in the run queue, where none does
// (measured with a pool of 8 at 50 ms on one core, need about 8: p99
// 0.68 s with the need's bound against 0.40 s without, medians of 3).
func (b *runBound) needBound(need float64) float64 {
	return max(b.procs, runHeadroom*need*max(1, b.needMul))
}

// Run-queue tuning (see WithRunQueue).
const (
	runTau      = 2 * time.Second // smoothing of the healthy running count
	runHeadroom = 2.0             // the bound is this many times the healthy count
	runGrow     = 1.25            // per period while requests wait and the signals have room
	runRoom     = 0.8             // ... below this load
	runBusy     = 0.5             // below this load (nothing shed or degraded) the queue is off
	runNeedBack = 0.95            // per period, the need's lift (below) decays back towards 1, as the bound does
)

// runBound learns the run queue's bound: twice the number of requests
// running at once while the server is busy but healthy, scaled to the
// load at target, never below a floor; it grows while requests wait at a
// full bound and the signals have room, up to the requests present.
//
// Once the capacity and the service time of a request running alone are
// known (solo.go), and the work is mostly on the CPU, the bound is also
// at most twice what the capacity needs running at once — capacity × solo
// service time, Little's law — and never below the cores (needBound):
// counting what runs at once while busy takes CPU sharing for need (on
// one core, handlers of 20 ms run ten at once at 0.9 of capacity, each
// taking ten times as long), and a bound of twice that keeps every
// request ten times slower than it need be. The need only lowers the
// bound; while requests wait at it and the signals have room it is lifted
// by the same quarter a period as the bound grows, so a need read too low
// (a dependency that slowed down) costs a few periods.
type runBound struct {
	mean    float64 // requests running at once while healthy, scaled to load 1
	limit   float64 // the learned bound; 0 = none yet
	floor   float64
	procs   float64 // the cores (GOMAXPROCS): the need's bound is never below them
	needMul float64 // the need's lift while requests wait at a full bound with room; ≥ 1 (0 = 1)
	last    int64   // the bound step published last (runOff or runCount too)
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
	// need is the number of requests the capacity needs running at once
	// (the capacity estimate × the solo service time), 0 while either is
	// unknown.
	need float64
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
	// Requests wait at a full bound while the signals have room: the
	// bound in force, not the server, is short. Waiters beside free slots
	// (a hand-over in progress, a waiter that stays) say nothing of the
	// bound, and lifting or growing it for them would run without end.
	room := in.waiting > 0 && !in.shedding && in.load < runRoom
	full := func(bound float64) bool { return float64(in.running) >= bound-1 }
	if room && b.last > 0 && full(float64(b.last)) {
		b.needMul = max(1, b.needMul) * runGrow
	} else {
		b.needMul = max(1, b.needMul*runNeedBack)
	}
	if in.need > 0 && b.limit > 0 {
		// No lift past the point where the need no longer binds.
		b.needMul = min(b.needMul, max(1, b.limit/(runHeadroom*in.need)))
	} else {
		b.needMul = 1 // nothing to lift: no need known, or no bound yet
	}
	if b.mean > 0 {
		b.limit = max(b.limit, runHeadroom*b.mean, b.floor)
		if room && full(b.limit) {
			// The learned bound is short (a slower dependency needs more
			// requests in flight, not fewer). It grows by a quarter, but
			// never past the requests that want a slot: more would not
			// run one more.
			b.limit = max(b.limit, min(b.limit*runGrow, float64(in.running+in.waiting)))
			b.mean = max(b.mean, b.limit/runHeadroom)
		} else {
			// Back towards the learned bound.
			b.limit = max(runHeadroom*b.mean, b.floor, b.limit*0.95)
		}
	}
	b.last = b.publish(in)
	return b.last
}

// publish is the bound step returns.
func (b *runBound) publish(in runIn) int64 {
	switch {
	case !(in.shedding || in.degraded || in.flood || in.load >= runBusy):
		return runOff
	case b.mean > 0 && in.need > 0 && in.need <= runHeadroom*b.procs:
		// The need is an estimate near a whole number of requests (on
		// CPU-bound work, the cores): rounded, not raised to the next one
		// by its noise.
		return int64(math.Ceil(min(b.limit, math.Round(b.needBound(in.need)))))
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
// period, given the configured wait and whether a signal says the queue
// absorbs a burst (signals.go's burster): a burst's queue stands for a
// while by design — it fits the callers' deadlines — and keeps the
// configured wait, first come first served; the count goes on, so the
// rule applies at once when the burst is over.
func (s *standing) step(configured time.Duration, burst bool) (lifo bool, wait time.Duration) {
	if s.oldest > int64(runStanding) {
		s.n++
	} else {
		s.n = 0
	}
	if s.n >= 2 && !burst {
		return true, min(configured, runShortWait)
	}
	return false, configured
}
