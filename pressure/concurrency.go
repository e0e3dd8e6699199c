package pressure

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/smooth"
	"github.com/levee-dev/levee/limit"
)

// Concurrency is the number of requests in flight against an adaptive
// concurrency limit (package limit). It implements levee.Signal with Name
// "concurrency", Value = peak in-flight of the last period ÷ limit and
// Target 1.
//
// It catches a slowing dependency while CPU stays low: requests waiting on
// a slow database pile up in flight, the limiter sees their round-trip time
// grow and lowers the limit, and in-flight ÷ limit rises above 1.
//
// The request path calls Acquire when a request starts and Release with
// its round-trip time when it ends: both are lock-free and do not allocate.
// Every period SampleAt hands the window's mean round-trip time and peak
// in-flight count to the limiter (once, under a mutex, off the request
// path) and recomputes the value, smoothed by an EWMA (default 200 ms).
// Value is NaN until the first sample.
//
// Safe for concurrent use.
type Concurrency struct {
	inflight atomic.Int64
	_        [56]byte
	peak     atomic.Int64
	_        [56]byte
	rttSum   atomic.Int64
	rttCount atomic.Int64
	_        [48]byte

	cfg   concConfig
	value atomicFloat
	limit atomic.Int64

	mu      sync.Mutex
	l       limit.Limiter
	lastAt  time.Time
	avg     smooth.EWMA
	reading ConcurrencyReading
}

var _ levee.Signal = (*Concurrency)(nil)

type concConfig struct {
	period time.Duration
	tau    time.Duration
}

// ConcurrencyOption configures a Concurrency.
type ConcurrencyOption func(*concConfig, *checker)

// WithConcurrencyPeriod sets the sample window, Run's period. Default
// 100ms; range [10ms, 1m]; 0 means the default.
func WithConcurrencyPeriod(d time.Duration) ConcurrencyOption {
	return func(c *concConfig, ch *checker) { ch.period("WithConcurrencyPeriod", d, &c.period) }
}

// WithConcurrencySmoothing sets the EWMA time constant of the value.
// Default 200ms; 0 disables smoothing; range [0, 1m].
func WithConcurrencySmoothing(d time.Duration) ConcurrencyOption {
	return func(c *concConfig, ch *checker) { ch.smoothing("WithConcurrencySmoothing", d, &c.tau) }
}

// NewConcurrency returns a concurrency signal driven by l; nil l means
// limit.NewGradient(). The Concurrency owns l from then on: only its
// SampleAt calls l.Update. It panics with a "pressure: ..." message on an
// out-of-range option, a programming error.
func NewConcurrency(l limit.Limiter, opts ...ConcurrencyOption) *Concurrency {
	cfg := concConfig{period: 100 * time.Millisecond, tau: 200 * time.Millisecond}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	if l == nil {
		l = limit.NewGradient()
	}
	c := &Concurrency{cfg: cfg, l: l, avg: smooth.EWMA{Tau: cfg.tau}}
	c.limit.Store(int64(max(1, l.Limit())))
	c.value.store(math.NaN())
	c.reading = ConcurrencyReading{Value: math.NaN(), Limit: l.Limit()}
	return c
}

// Name returns "concurrency".
func (c *Concurrency) Name() string { return "concurrency" }

// Value returns the smoothed peak in-flight ÷ limit, NaN before the first
// sample.
func (c *Concurrency) Value() float64 { return c.value.load() }

// Target returns 1: at the limit.
func (c *Concurrency) Target() float64 { return 1 }

// Period returns the sample window, Run's period.
func (c *Concurrency) Period() time.Duration { return c.cfg.period }

// Limit returns the limit computed at the latest sample.
func (c *Concurrency) Limit() int { return int(c.limit.Load()) }

// InFlight returns the number of requests in flight now.
func (c *Concurrency) InFlight() int { return int(max(0, c.inflight.Load())) }

// Acquire records that a request started. Every Acquire must be followed by
// one Release. Lock-free, no allocation.
func (c *Concurrency) Acquire() {
	n := c.inflight.Add(1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			return
		}
	}
}

// Release records that a request started by Acquire ended after rtt
// (its time in the handler, or the call to the dependency the limit
// protects). A non-positive rtt releases without a latency sample.
// Lock-free, no allocation.
func (c *Concurrency) Release(rtt time.Duration) {
	c.inflight.Add(-1)
	if rtt > 0 {
		c.rttSum.Add(int64(rtt))
		c.rttCount.Add(1)
	}
}

// ConcurrencyReading is the detail of the latest sample.
type ConcurrencyReading struct {
	Time time.Time
	// Value is what Value returns.
	Value float64
	// Peak is the highest in-flight count of the window.
	Peak int
	// Limit is the limiter's limit after the window's update.
	Limit int
	// RTT is the window's mean round-trip time, 0 without samples.
	RTT time.Duration
	// Samples is the number of Releases with an RTT in the window.
	Samples int64
}

// Reading returns the detail of the latest sample.
func (c *Concurrency) Reading() ConcurrencyReading {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reading
}

// SampleAt closes the window at now: it updates the limiter with the
// window's mean RTT and peak in-flight (when at least one request ended in
// it) and recomputes the value. A sample less than half a period after
// the previous one is skipped (the next one covers its time).
func (c *Concurrency) SampleAt(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dt, ok := advance(&c.lastAt, now, c.cfg.period)
	if !ok {
		return
	}
	cur := max(0, c.inflight.Load())
	peak := max(cur, c.peak.Swap(cur))
	n := c.rttCount.Swap(0)
	sum := c.rttSum.Swap(0)
	var rtt time.Duration
	if n > 0 {
		rtt = time.Duration(sum / n)
		c.l.Update(now, rtt, int(peak))
	}
	lim := max(1, c.l.Limit())
	c.limit.Store(int64(lim))
	v := c.avg.Update(float64(peak)/float64(lim), dt)
	c.value.store(v)
	c.reading = ConcurrencyReading{Time: now, Value: v, Peak: int(peak), Limit: lim, RTT: rtt, Samples: n}
}

// Run samples every Period with real time until ctx is done.
func (c *Concurrency) Run(ctx context.Context) { run(ctx, c.cfg.period, c.SampleAt) }
