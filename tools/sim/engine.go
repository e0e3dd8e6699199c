package sim

import "time"

// evKind says what an event does when it fires.
type evKind uint8

const (
	evArrival      evKind = iota // a client population creates a request (i = population)
	evAttemptTimer               // a caller stops waiting for an attempt (c, gen)
	evRetry                      // a caller's backoff is over (c, gen)
	evServiceDone                // a core finishes a job (j, gen)
	evControl                    // control period: signals, admit.Step, health checks, series
	evScenario                   // a scenario event (i = index)
	evRestart                    // a crashed instance comes back (i = instance, gen)
	evEventEnd                   // a scenario event with a duration ends (i = index)
	evPhase                      // a phase boundary (i = phase index)
)

// event is an entry of the event queue. Events that may become stale carry
// the generation of the object they act on and are dropped when it moved on.
type event struct {
	t    int64 // virtual time, ns
	seq  uint64
	c    *call
	j    *job
	i    int32
	gen  uint32
	kind evKind
}

func (a *event) before(b *event) bool {
	return a.t < b.t || (a.t == b.t && a.seq < b.seq)
}

// queue is a 4-ary min-heap of events ordered by (time, insertion order),
// so equal times fire in the order they were scheduled: deterministic.
type queue struct {
	h   []event
	seq uint64
}

func (q *queue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	h := q.h
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !h[i].before(&h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *queue) pop() event {
	h := q.h
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = event{}
	h = h[:n]
	q.h = h
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for k := c + 1; k < end; k++ {
			if h[k].before(&h[m]) {
				m = k
			}
		}
		if !h[m].before(&h[i]) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	return top
}

func (q *queue) len() int { return len(q.h) }

// lane is a FIFO of timer events whose times never decrease: attempt
// timeouts of one duration, set at "now + duration". It spares the heap the
// largest class of events (most of which go stale) at O(1) per event.
type lane struct {
	d    int64 // the duration whose timers this lane holds
	ring []event
	h, n int
}

func (l *lane) push(e event) {
	if l.n == len(l.ring) {
		r := make([]event, max(256, 2*len(l.ring)))
		for i := 0; i < l.n; i++ {
			r[i] = l.ring[(l.h+i)%len(l.ring)]
		}
		l.ring, l.h = r, 0
	}
	l.ring[(l.h+l.n)%len(l.ring)] = e
	l.n++
}

func (l *lane) tail() int64 { return l.ring[(l.h+l.n-1)%len(l.ring)].t }

func (l *lane) head() *event { return &l.ring[l.h] }

func (l *lane) pop() event {
	e := l.ring[l.h]
	l.ring[l.h] = event{}
	l.h++
	if l.h == len(l.ring) {
		l.h = 0
	}
	l.n--
	return e
}

// epoch is virtual time zero. A fixed date keeps every run identical.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// at converts virtual nanoseconds to the time.Time the policies see.
func at(t int64) time.Time { return epoch.Add(time.Duration(t)) }

const never = int64(1<<63 - 1)
