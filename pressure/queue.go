package pressure

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/smooth"
)

// QueueDelay is the time requests waited between their arrival and the
// start of their handler, in seconds. It implements levee.Signal with Name
// "queue_delay" and a default Target of 5 ms.
//
// The reading follows CoDel (Nichols and Jacobson, "Controlling Queue
// Delay"): the value of an interval (default 100 ms) is the minimum delay
// observed during it. A burst that drains quickly leaves some requests with
// short waits and reads low; a standing queue — every request of the
// interval waited longer than the target — reads high. An interval without
// any observation reads 0 (no handler started: the server is idle, or stuck,
// which the CPU and scheduler signals see). Value is NaN until the first
// interval closes. No smoothing by default: the interval minimum is already
// a robust statistic.
//
// Observe is lock-free and does not allocate; Value and Target are atomic
// reads. Safe for concurrent use.
type QueueDelay struct {
	min atomic.Int64 // minimum delay of the open interval, ns; noObservation when none
	_   [56]byte     // keep the contended word apart from the fields below

	cfg   queueConfig
	value atomicFloat

	mu      sync.Mutex
	lastAt  time.Time
	avg     smooth.EWMA
	reading QueueReading
}

const noObservation = math.MaxInt64

var _ levee.Signal = (*QueueDelay)(nil)

type queueConfig struct {
	target   float64
	interval time.Duration
	tau      time.Duration
}

// QueueOption configures a QueueDelay.
type QueueOption func(*queueConfig, *checker)

// WithQueueTarget sets the standing-queue delay the controller steers to.
// Default 5ms (CoDel's target); range (0, 1m]; 0 means the default.
func WithQueueTarget(d time.Duration) QueueOption {
	return func(c *queueConfig, ch *checker) {
		if d == 0 {
			return
		}
		ch.check(d > 0 && d <= time.Minute, "WithQueueTarget", "must be in (0, 1m] (0 means the default, 5ms)", d)
		c.target = d.Seconds()
	}
}

// WithQueueInterval sets the interval over which the minimum is taken,
// which is also Run's sampling period. Default 100ms (CoDel's interval);
// range [10ms, 1m]; 0 means the default. It should exceed the usual time
// between requests.
func WithQueueInterval(d time.Duration) QueueOption {
	return func(c *queueConfig, ch *checker) { ch.period("WithQueueInterval", d, &c.interval) }
}

// WithQueueSmoothing sets an EWMA time constant over the interval minima.
// Default 0 (none); range [0, 1m].
func WithQueueSmoothing(d time.Duration) QueueOption {
	return func(c *queueConfig, ch *checker) { ch.smoothing("WithQueueSmoothing", d, &c.tau) }
}

// NewQueueDelay returns a queueing delay signal. It panics with a
// "pressure: ..." message on an out-of-range option, a programming error.
func NewQueueDelay(opts ...QueueOption) *QueueDelay {
	cfg := queueConfig{target: 0.005, interval: 100 * time.Millisecond}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	q := &QueueDelay{cfg: cfg, avg: smooth.EWMA{Tau: cfg.tau}}
	q.min.Store(noObservation)
	q.value.store(math.NaN())
	q.reading = QueueReading{Value: math.NaN(), Min: math.NaN()}
	return q
}

// Name returns "queue_delay".
func (q *QueueDelay) Name() string { return "queue_delay" }

// Value returns the latest interval's minimum delay in seconds (smoothed if
// configured), NaN before the first interval closes.
func (q *QueueDelay) Value() float64 { return q.value.load() }

// Target returns the target delay in seconds (default 0.005).
func (q *QueueDelay) Target() float64 { return q.cfg.target }

// Period returns the interval, Run's sampling period.
func (q *QueueDelay) Period() time.Duration { return q.cfg.interval }

// Observe records that a request waited d between its arrival (the
// earliest timestamp the server has: a listener or ConnContext time) and
// the start of its handler. Negative d counts as 0. Lock-free, no
// allocation, no system call; when d is not a new minimum it is a single
// atomic load.
func (q *QueueDelay) Observe(d time.Duration) {
	n := max(int64(d), 0)
	for {
		cur := q.min.Load()
		if n >= cur || q.min.CompareAndSwap(cur, n) {
			return
		}
	}
}

// QueueReading is the detail of the latest interval.
type QueueReading struct {
	Time time.Time
	// Value is what Value returns, seconds.
	Value float64
	// Min is the interval's minimum delay in seconds, 0 without observations.
	Min float64
	// Observed reports whether any request was observed in the interval.
	Observed bool
}

// Reading returns the detail of the latest interval.
func (q *QueueDelay) Reading() QueueReading {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.reading
}

// SampleAt closes the interval at now and starts the next one. A sample
// less than half an interval after the previous one is skipped: the
// interval stays open (a short interval's minimum is biased upwards).
func (q *QueueDelay) SampleAt(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	dt, ok := advance(&q.lastAt, now, q.cfg.interval)
	if !ok {
		return
	}
	m := q.min.Swap(noObservation)
	raw, observed := 0.0, m != noObservation
	if observed {
		raw = time.Duration(m).Seconds()
	}
	v := q.avg.Update(raw, dt)
	q.value.store(v)
	q.reading = QueueReading{Time: now, Value: v, Min: raw, Observed: observed}
}

// Run closes an interval every Period with real time until ctx is done.
// Unlike the other signals its first value comes one interval after the
// start, not at once.
func (q *QueueDelay) Run(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	q.mu.Lock()
	if q.lastAt.IsZero() {
		q.lastAt = time.Now()
	}
	q.mu.Unlock()
	ticks(ctx, q.cfg.interval, q.SampleAt)
}
