package proxy

import (
	"math"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/throttle"
)

// outcome is what one attempt says about its backend.
type outcome uint8

const (
	// answered: a response the backend produced (any status but those
	// below). Accepted by the throttle, a latency sample for the limit.
	answered outcome = iota
	// overloaded: a 503 or 504, or no response headers in time. Not
	// accepted by the throttle; backs the limit off; never a failure.
	overloaded
	// failed: the connection was refused or reset, or a 500 or 502. Counts
	// towards ejection; says nothing about load.
	failed
	// unreached: the caller went away; nothing learned.
	unreached
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"answered", "overloaded", "failed", "unreached"}

func (o outcome) String() string { return outcomeNames[o] }

// backend is one upstream server: its identity and connections, the state
// the request path reads and writes with atomics, and the state only the
// control loop touches.
type backend struct {
	addr string            // host:port, the backend's identity
	rt   http.RoundTripper // its own connection pool
	tr   *http.Transport   // rt when built here (nil for injected ones)
	th   *throttle.Throttle
	spec connSpec
	seed uint64 // per-backend seed of its throttle

	nextCheck atomic.Int64 // unix ns of the next health check; 0: unscheduled
	checking  atomic.Bool  // a health check is in flight

	// The request path, lock-free.
	inflight atomic.Int64
	capacity atomic.Int64  // in flight allowed now; ≤ 0: not routable
	cost     atomic.Uint64 // float64 bits: the balancer's weight
	win      winCounters
	consec   atomic.Int64 // consecutive failures
	refused  atomic.Bool  // a connection was refused since the last step
	load     atomic.Uint64
	loadAt   atomic.Int64 // unix ns of the last Levee-Load reading; 0: none
	health   healthState
	count    [numOutcomes]atomic.Uint64
	retried  atomic.Uint64 // attempts that were retries (to this backend)
	resets   atomic.Uint64 // responses cut while streaming

	// The control loop's own.
	lim  *adaptiveLimit
	rot  rotation
	pend pending
}

// winCounters accumulate one sample window on the request path.
type winCounters struct {
	n, rtt, over, peak atomic.Int64
}

// pending is the window being accumulated by the control loop: windows
// with too few samples are merged until they say something.
type pending struct {
	w     window
	sum   time.Duration
	start time.Time
}

// tryAcquire takes an in-flight slot if the backend is routable and below
// its capacity.
func (b *backend) tryAcquire() bool {
	c := b.capacity.Load()
	if c <= 0 {
		return false
	}
	v := b.inflight.Add(1)
	if v > c {
		b.inflight.Add(-1)
		return false
	}
	for {
		p := b.win.peak.Load()
		if v <= p || b.win.peak.CompareAndSwap(p, v) {
			return true
		}
	}
}

// available reports whether tryAcquire would probably succeed.
func (b *backend) available() bool {
	c := b.capacity.Load()
	return c > 0 && b.inflight.Load() < c
}

// score is the balancer's measure of how busy the backend is: in-flight
// requests, one more for the one being placed, over its capacity, times
// its cost (load and failures). Lower is better.
func (b *backend) score() float64 {
	c := b.capacity.Load()
	if c <= 0 {
		return math.Inf(1)
	}
	return float64(b.inflight.Load()+1) / float64(c) * math.Float64frombits(b.cost.Load())
}

// observe records one finished attempt for the sample window, the
// outlier counter and the counters (the forwarder reports it to the
// throttle). rtt is the time to response headers (or to the failure).
func (b *backend) observe(o outcome, rtt time.Duration) {
	b.count[o].Add(1)
	switch o {
	case answered:
		b.win.n.Add(1)
		b.win.rtt.Add(int64(rtt))
		if b.consec.Load() != 0 {
			b.consec.Store(0)
		}
	case overloaded:
		b.win.over.Add(1)
		if b.consec.Load() != 0 {
			b.consec.Store(0)
		}
	case failed:
		b.consec.Add(1)
	}
}

// setLoad records a Levee-Load reading taken at now.
func (b *backend) setLoad(v float64, now time.Time) {
	b.load.Store(math.Float64bits(min(v, maxLoad)))
	b.loadAt.Store(now.UnixNano())
}

// maxLoad bounds a backend's reported load: beyond 10× its target more
// says nothing the balancer can use, and a lying backend gains nothing.
const maxLoad = 10

// loadAt returns the backend's last load reading faded by its age: a
// reading halves in about 0.7 decay (exp(−age/decay)).
func (b *backend) loadNow(now time.Time, decay time.Duration) float64 {
	at := b.loadAt.Load()
	if at == 0 {
		return 0
	}
	v := math.Float64frombits(b.load.Load())
	age := now.Sub(time.Unix(0, at))
	if age <= 0 || decay <= 0 {
		return v
	}
	return v * math.Exp(-float64(age)/float64(decay))
}

// drain takes the request path's window counters.
func (b *backend) drainWindow() window {
	n := b.win.n.Swap(0)
	sum := b.win.rtt.Swap(0)
	w := window{n: int(n), overload: int(b.win.over.Swap(0)), peak: int(b.win.peak.Swap(b.inflight.Load()))}
	if n > 0 {
		w.rtt = time.Duration(sum / n)
	}
	return w
}

// healthState is the last active checks' verdict, written by the backend's
// checker and read by the control loop.
type healthState struct {
	last    atomic.Uint32 // a checkResult
	okRun   atomic.Int64  // consecutive healthy or overloaded results
	failRun atomic.Int64  // consecutive failed results
}

// checkResult is one active health check's verdict.
type checkResult uint32

const (
	checkNone checkResult = iota
	checkHealthy
	checkOverloaded // alive and busy: never a reason to eject
	checkFailed
)

var checkNames = [...]string{"unknown", "healthy", "overloaded", "failed"}

func (c checkResult) String() string { return checkNames[c] }

func (h *healthState) record(c checkResult) {
	h.last.Store(uint32(c))
	if c == checkFailed {
		h.okRun.Store(0)
		h.failRun.Add(1)
		return
	}
	h.failRun.Store(0)
	h.okRun.Add(1)
}
