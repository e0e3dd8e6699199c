package leveehttp

import (
	"math"
	"net"
	"sync"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/pressure"
)

// Backlog is the scheduler-latency signal as an HTTP server should hand it
// to its admission controller: the same signal, whose Unread also counts
// the connections waiting in the accept queues of the listeners it
// watches. On a saturated server demand waits unread in two places: in
// Go's run queue, as connections whose next request has arrived
// (pressure.SchedLatency's Unread), and, for connections not yet accepted,
// in the kernel's accept queue, where a client that connects sends its
// request at once. Neither is in any count of arrivals until it is read;
// the admission controller adds the growth of the sum to the arrival rate
// while it is overloaded (package admit, WithSignals). Protect wires it;
// a server built by hand passes it to admit.WithSignals in place of the
// SchedLatency it wraps (Replace) and watches the listener it serves on.
//
// The accept queue is read on Linux (one getsockopt(TCP_INFO) per watched
// listener, when Unread is called: once a control period); elsewhere only
// the run queue counts.
type Backlog struct {
	*pressure.SchedLatency

	mu  sync.Mutex
	lns []*watched
}

// watched is one listener whose accept queue counts.
type watched struct{ ln net.Listener }

// NewBacklog returns s's Backlog, watching no listener yet. s must not be
// nil.
func NewBacklog(s *pressure.SchedLatency) *Backlog {
	if s == nil {
		panic("leveehttp: NewBacklog(nil)")
	}
	return &Backlog{SchedLatency: s}
}

// Replace returns a copy of sigs with the SchedLatency b wraps replaced
// by b: the signals of a pressure.Set as an admission controller should
// read them.
func (b *Backlog) Replace(sigs []levee.Signal) []levee.Signal {
	out := make([]levee.Signal, len(sigs))
	for i, s := range sigs {
		if s == levee.Signal(b.SchedLatency) {
			s = b
		}
		out[i] = s
	}
	return out
}

// Watch adds ln's accept queue to Unread until the returned function is
// called. Pass the listener the server accepts from (a *net.TCPListener,
// before any wrapping): a wrapped one hides its socket. A listener whose
// queue cannot be read (not TCP, closed, not Linux) adds nothing.
func (b *Backlog) Watch(ln net.Listener) (unwatch func()) {
	w := &watched{ln: ln}
	b.mu.Lock()
	b.lns = append(b.lns, w)
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for i, x := range b.lns {
			if x == w {
				b.lns = append(b.lns[:i], b.lns[i+1:]...)
				return
			}
		}
	}
}

// Unread returns the goroutines waiting for a processor (the wrapped
// signal's Unread) plus the connections waiting in the watched listeners'
// accept queues; NaN when neither can be read.
func (b *Backlog) Unread() float64 {
	u := b.SchedLatency.Unread()
	known := !math.IsNaN(u)
	if !known {
		u = 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range b.lns {
		if n, ok := acceptQueue(w.ln); ok {
			u += float64(n)
			known = true
		}
	}
	if !known {
		return math.NaN()
	}
	return u
}
