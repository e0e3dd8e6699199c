package pressure

import (
	"sync/atomic"
	"time"
)

// Pauses keeps one request's pauses for a Concurrency signal: a server
// adapter embeds it in its per-request state to implement levee.Pauser.
// While at least one pause lasts the request is out of the signal's count
// in the handler (Suspend); the time paused is returned by End, for DoneAt
// to leave out of its service time. Pause and Unpause after End do
// nothing, and End undoes a pause still open, so a goroutine that
// outlives its handler cannot unbalance the count. The zero Pauses is
// ready; lock-free and allocation-free; safe for concurrent use.
type Pauses struct {
	word  atomic.Int64 // open pauses, | pausesEnded once ended
	since atomic.Int64 // when the open pauses began, ns since pausesEpoch
	total atomic.Int64 // ns of finished pauses
}

const pausesEnded = 1 << 62

// pausesEpoch is the origin of Pauses' times: durations from it use the
// monotonic clock, as DoneAt's do, so that a wall-clock step during a
// pause changes nothing.
var pausesEpoch = time.Now()

// Pause opens a pause; the first open one suspends the request from c (nil:
// only the time is kept).
func (p *Pauses) Pause(c *Concurrency) {
	for {
		w := p.word.Load()
		if w&pausesEnded != 0 {
			return
		}
		if p.word.CompareAndSwap(w, w+1) {
			if w == 0 {
				p.since.Store(int64(max(1, time.Since(pausesEpoch))))
				if c != nil {
					c.Suspend()
				}
			}
			return
		}
	}
}

// Unpause closes a pause; the last open one resumes the request.
func (p *Pauses) Unpause(c *Concurrency) {
	for {
		w := p.word.Load()
		if w&pausesEnded != 0 || w == 0 {
			return
		}
		if p.word.CompareAndSwap(w, w-1) {
			if w == 1 {
				p.addSince(time.Now())
				if c != nil {
					c.Resume()
				}
			}
			return
		}
	}
}

// End closes the request's pauses at now — resuming it if one was still
// open — and returns the time it spent paused. Later calls return 0.
func (p *Pauses) End(c *Concurrency, now time.Time) time.Duration {
	w := p.word.Swap(pausesEnded)
	if w&pausesEnded != 0 {
		return 0
	}
	if w > 0 {
		p.addSince(now)
		if c != nil {
			c.Resume()
		}
	}
	return time.Duration(p.total.Load())
}

// addSince adds the time from the open pauses' start to now. A start not
// yet stored (End racing the Pause that opened them) adds nothing; a
// total that exceeds the request's time makes DoneAt drop its sample.
func (p *Pauses) addSince(now time.Time) {
	if s := p.since.Load(); s != 0 {
		p.total.Add(max(0, int64(now.Sub(pausesEpoch))-s))
	}
}
