package admit

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
)

// runQueue bounds how many admitted requests run at once (Ticket.Wait) and
// queues the rest in arrival order.
//
// Why: a CPU-bound handler that runs longer than Go's 10 ms preemption
// slice shares the CPU with every other runnable handler. Admit twenty of
// them at once on one core and all twenty finish 400 ms later, none in
// 20 ms; the controller's own goroutines wait behind them for the CPU, so
// the control loop is blind exactly while the backlog grows; and every
// request that waits is already running, so none can be dropped when its
// caller gives up. With a bound, the excess waits here instead, parked: it
// costs no CPU, runs in order, leaves when its caller goes away, and is
// checked against its deadline before it starts.
//
// While the server is not busy (the signals below half their targets,
// nothing shed or degraded) the queue is off: Wait and Done cost one
// atomic load. Otherwise the fast path (no waiter, a free slot) is two
// atomic additions; only a request that must wait, and the release that
// hands it a slot, take the mutex.
type runQueue struct {
	running atomic.Int64 // tickets holding a slot
	_       [56]byte
	waiting atomic.Int64 // waiters queued
	limit   atomic.Int64 // the bound, or runOff, runCount
	_       [48]byte

	mu         sync.Mutex
	head, tail *waiter
	lifo       bool    // a standing queue: serve the newest waiter first
	free       *waiter // recycled waiters, under mu
	nfree      int
}

// waiter is one request waiting for a slot. Its fields other than ch are
// guarded by runQueue.mu.
type waiter struct {
	ch         chan bool // capacity 1: true = granted a slot, false = expired
	next, prev *waiter
	enq        int64 // unix ns when queued
	state      uint8
}

const (
	waiting = iota
	granted
	expired
)

// Values of runQueue.limit besides a bound.
const (
	// runOff: the server is not busy; requests take no slot and are not
	// counted (the accept path then pays nothing for the run queue).
	runOff = math.MaxInt64
	// runCount: busy, nothing learned yet: slots are counted, not bounded.
	runCount = math.MaxInt64 - 1
)

func (q *runQueue) init() { q.limit.Store(runOff) }

// on reports whether requests take slots.
func (q *runQueue) on() bool { return q.limit.Load() != runOff }

// tryFast takes a slot if nobody waits and one is free.
func (q *runQueue) tryFast() bool {
	if q.waiting.Load() != 0 {
		return false
	}
	if q.running.Add(1) <= q.limit.Load() {
		return true
	}
	q.release() // undo: a waiter queued meanwhile may take the slot
	return false
}

// release frees a slot, handing it to the oldest waiter if the bound
// allows. The Dekker order (running, then waiting; a waiter does waiting,
// then running) means either release sees the waiter or the waiter's
// dispatch sees the free slot.
func (q *runQueue) release() {
	q.running.Add(-1)
	if q.waiting.Load() > 0 {
		q.mu.Lock()
		q.dispatchLocked()
		q.mu.Unlock()
	}
}

// dispatchLocked grants slots to waiters, oldest first (newest first
// while the queue stands, see standing), while the bound allows.
func (q *runQueue) dispatchLocked() {
	for q.head != nil && q.running.Load() < q.limit.Load() {
		w := q.head
		if q.lifo {
			w = q.tail
		}
		q.unlinkLocked(w)
		q.running.Add(1)
		w.state = granted
		w.ch <- true
	}
}

// wait queues the caller and blocks until it is granted a slot (true), its
// wait expires (false, true) or ctx is done (false, false).
func (q *runQueue) wait(ctx context.Context, now int64) (ok, timedOut bool) {
	q.mu.Lock()
	w := q.free
	if w != nil {
		q.free, q.nfree = w.next, q.nfree-1
		w.next = nil
	} else {
		w = &waiter{ch: make(chan bool, 1)}
	}
	w.enq, w.state = now, waiting
	if q.tail == nil {
		q.head = w
	} else {
		q.tail.next, w.prev = w, q.tail
	}
	q.tail = w
	q.waiting.Add(1)
	q.dispatchLocked()
	q.mu.Unlock()

	select {
	case g := <-w.ch:
		q.recycle(w)
		return g, !g
	case <-ctx.Done():
	}
	q.mu.Lock()
	switch w.state {
	case waiting:
		q.unlinkLocked(w)
		q.recycleLocked(w)
		q.mu.Unlock()
		return false, false
	case granted: // granted as ctx ended: give the slot back
		<-w.ch
		q.recycleLocked(w)
		q.mu.Unlock()
		q.release()
		return false, false
	default: // expired
		<-w.ch
		q.recycleLocked(w)
		q.mu.Unlock()
		return false, true
	}
}

// expire ends the waits that began before cutoff, oldest first, sets the
// dispatch order (lifo) and grants slots the bound allows (after a limit
// change). It returns how long the oldest waiter left had waited at now
// (0 if none).
func (q *runQueue) expire(now, cutoff int64, lifo bool) (oldest int64) {
	if q.waiting.Load() == 0 {
		q.mu.Lock()
		q.lifo = lifo
		q.mu.Unlock()
		return 0
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lifo = lifo
	for q.head != nil && q.head.enq < cutoff {
		w := q.head
		q.unlinkLocked(w)
		w.state = expired
		w.ch <- false
	}
	q.dispatchLocked()
	if q.head != nil {
		oldest = now - q.head.enq
	}
	return oldest
}

func (q *runQueue) unlinkLocked(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.next, w.prev = nil, nil
	q.waiting.Add(-1)
}

func (q *runQueue) recycle(w *waiter) {
	q.mu.Lock()
	q.recycleLocked(w)
	q.mu.Unlock()
}

// recycleLocked keeps w for reuse (at most maxFreeWaiters are kept).
func (q *runQueue) recycleLocked(w *waiter) {
	if q.nfree >= maxFreeWaiters {
		return
	}
	w.next, w.prev = q.free, nil
	q.free, q.nfree = w, q.nfree+1
}

const maxFreeWaiters = 64
