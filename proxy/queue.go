package proxy

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
)

// waitQueue holds the requests that found every backend at its limit. A
// backend slot freed by a finished request is handed straight to the best
// waiter (highest criticality, then the oldest), so a newcomer never takes
// it first and the order of sacrifice holds: when the queue is full, a
// newcomer displaces the newest waiter of a lower criticality, or is shed
// itself; a waiter whose wait runs out is shed. Shed means 503 overloaded
// with a Retry-After, as levee's servers answer.
//
// Only the saturated path takes the mutex: while nobody waits, the request
// path reads one atomic (n) and never touches the queue.
type waitQueue struct {
	n    atomic.Int64  // waiters queued
	rate atomic.Uint64 // float64 bits: slots freed per second (the control loop's estimate)

	mu     sync.Mutex
	levels [levee.NumCriticalities]waitList // by Rank: 0 = SHEDDABLE
	count  [levee.NumCriticalities]int      // waiters by Rank
	max    int                              // the bound on waiters
}

type waitList struct{ head, tail *waiter }

// waiter is one request waiting for a slot. ch receives the backend it was
// given, or nil when it was displaced.
type waiter struct {
	ch         chan *backend
	rank       int
	excl       exclude
	next, prev *waiter
	queued     bool // guarded by waitQueue.mu
}

func (q *waitQueue) setMax(n int) {
	q.mu.Lock()
	q.max = max(n, 1)
	q.mu.Unlock()
}

func (l *waitList) push(w *waiter) {
	w.prev, w.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
}

func (l *waitList) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.next, w.prev = nil, nil
}

// removeLocked takes w out of the queue.
func (q *waitQueue) removeLocked(w *waiter) {
	q.levels[w.rank].remove(w)
	q.count[w.rank]--
	w.queued = false
	q.n.Add(-1)
}

// setRate records the rate at which slots are freed, per second.
func (q *waitQueue) setRate(r float64) { q.rate.Store(math.Float64bits(r)) }

// hopelessLocked reports whether a newcomer of rank would wait longer than
// d: the waiters served before it (those of its rank and above, and
// itself) at the rate slots are freed. Such a request is shed at once
// rather than made to wait for nothing: under a lasting overload the
// lowest criticality is refused in microseconds, not after d.
func (q *waitQueue) hopelessLocked(rank int, d time.Duration) bool {
	rate := math.Float64frombits(q.rate.Load())
	if !(rate > 0) {
		return false // nothing measured yet
	}
	ahead := 1
	for r := rank; r < len(q.count); r++ {
		ahead += q.count[r]
	}
	return float64(ahead)/rate > d.Seconds()
}

// grantLocked gives b (a slot already taken) to w.
func (q *waitQueue) grantLocked(w *waiter, b *backend) {
	q.removeLocked(w)
	w.ch <- b
}

// errShed are the queue's rejections, by criticality: SHEDDABLE_PLUS
// (deferrable work) is told to come back later than the others, as admit
// does.
var errShed = func() (e [levee.NumCriticalities]*levee.RejectedError) {
	for c := range levee.NumCriticalities {
		d := time.Second
		if levee.Criticality(c) == levee.SheddablePlus {
			d = 2 * time.Second
		}
		e[c] = &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: d}
	}
	return e
}()

// errQueueDeadline is answered when the request's deadline leaves no time
// to wait.
var errQueueDeadline = &levee.RejectedError{Reason: levee.Deadline, NoRetry: true}

// wait queues a request of criticality c until pick (the balancer's, which
// takes a slot) or a release hands it a backend, its wait of at most d
// ends, or ctx ends. It returns the backend, a shed rejection, or the
// deadline rejection when ctx's deadline ended the wait.
func (q *waitQueue) wait(ctx context.Context, c levee.Criticality, excl exclude, d time.Duration,
	pick func(exclude) *backend, release func(*backend)) (*backend, error) {
	if !c.Valid() {
		c = levee.Critical
	}
	if d <= 0 {
		return nil, errShed[c]
	}
	patience := d
	if dl, ok := ctx.Deadline(); ok {
		patience = min(d, time.Until(dl))
	}
	w := &waiter{ch: make(chan *backend, 1), rank: c.Rank(), excl: excl}
	q.mu.Lock()
	if q.hopelessLocked(w.rank, patience) {
		q.mu.Unlock()
		return nil, errShed[c]
	}
	if total := int(q.n.Load()); total >= q.max {
		victim := q.lowestBelowLocked(w.rank)
		if victim == nil {
			q.mu.Unlock()
			return nil, errShed[c]
		}
		q.removeLocked(victim)
		victim.ch <- nil
	}
	q.levels[w.rank].push(w)
	q.count[w.rank]++
	w.queued = true
	q.n.Add(1)
	q.mu.Unlock()

	// A slot freed between the caller's failed pick and the enqueue had
	// nobody to go to: look once more.
	if b := pick(excl); b != nil {
		q.mu.Lock()
		if w.queued {
			q.removeLocked(w)
			q.mu.Unlock()
			return b, nil
		}
		q.mu.Unlock()
		if got := <-w.ch; got != nil {
			release(got)
		}
		return b, nil
	}

	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case b := <-w.ch:
		if b == nil {
			return nil, errShed[c]
		}
		return b, nil
	case <-t.C:
	case <-ctx.Done():
	}
	q.mu.Lock()
	queued := w.queued
	if queued {
		q.removeLocked(w)
	}
	q.mu.Unlock()
	var b *backend
	if !queued {
		b = <-w.ch // granted or displaced meanwhile
	}
	if err := ctx.Err(); err != nil {
		if b != nil {
			release(b)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, errQueueDeadline
		}
		return nil, err
	}
	if b == nil {
		return nil, errShed[c]
	}
	return b, nil
}

// lowestBelowLocked returns the newest waiter of the lowest criticality
// below rank, or nil.
func (q *waitQueue) lowestBelowLocked(rank int) *waiter {
	for r := 0; r < rank; r++ {
		if t := q.levels[r].tail; t != nil {
			return t
		}
	}
	return nil
}

// handOff gives b's freed slot to the best waiter that may use b, taking
// the slot for it. It reports whether it did.
func (q *waitQueue) handOff(b *backend) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for r := len(q.levels) - 1; r >= 0; r-- {
		for w := q.levels[r].head; w != nil; w = w.next {
			if w.excl.has(b) {
				continue
			}
			if !b.tryAcquire() {
				return false
			}
			q.grantLocked(w, b)
			return true
		}
	}
	return false
}

// dispatch serves waiters, best first, as long as pick finds slots for
// them: the control loop calls it after limits grew or backends returned.
func (q *waitQueue) dispatch(pick func(exclude) *backend) {
	if q.n.Load() == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for r := len(q.levels) - 1; r >= 0; r-- {
		for w := q.levels[r].head; w != nil; {
			next := w.next
			b := pick(w.excl)
			if b == nil && w.excl.empty() {
				return // nothing free for anybody
			}
			if b != nil {
				q.grantLocked(w, b)
			}
			w = next
		}
	}
}
