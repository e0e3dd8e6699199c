package pressure

import (
	"context"
	"math"
	"runtime"
	"sync"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/smooth"
)

// Count is a number of things this process holds against a limit on it,
// as a fraction of the limit: goroutines against a ceiling the service
// configures (NewGoroutines), open file descriptors against RLIMIT_NOFILE
// (NewOpenFiles). 1 means the limit is reached: past a goroutine ceiling
// the process is one stack-hungry burst from exhausting its memory; at the
// descriptor limit accept fails with EMFILE and the listener stops taking
// connections, health probes included. It implements levee.Signal; Value
// is the count ÷ the limit smoothed by an EWMA (default none), NaN until
// the first sample and while the count or the limit cannot be read
// (Reading().Err says why).
//
// Both grow with requests in flight and shrink when they end (open files
// also when idle keep-alive connections close), so shedding helps, after
// a delay: a controller should treat them as limits, not rates (see the
// package documentation). Safe for concurrent use.
type Count struct {
	name   string
	cfg    countConfig
	target atomicFloat
	value  atomicFloat

	mu      sync.Mutex
	lastAt  time.Time
	avg     smooth.EWMA
	reading CountReading
}

var _ levee.Signal = (*Count)(nil)

type countConfig struct {
	target float64
	period time.Duration
	tau    time.Duration
	read   func() (n, limit int64, err error)
}

// CountOption configures a Count signal.
type CountOption func(*countConfig, *checker)

// WithCountTarget sets the fraction of the limit the controller steers to.
// Default 0.9 for goroutines, 0.8 for open files; range (0, 1]; 0 means
// the default.
func WithCountTarget(f float64) CountOption {
	return func(c *countConfig, ch *checker) {
		set(ch, &c.target, f, f > 0 && f <= 1, "WithCountTarget", "must be in (0, 1] (0 means the default)")
	}
}

// WithCountPeriod sets how often Run samples. Default 100ms for
// goroutines, 1s for open files (each sample lists the descriptor
// table); range [10ms, 1m]; 0 means the default.
func WithCountPeriod(d time.Duration) CountOption {
	return func(c *countConfig, ch *checker) { ch.period("WithCountPeriod", d, &c.period) }
}

// WithCountSmoothing sets the EWMA time constant of the value. Default 0
// (none); range [0, 1m].
func WithCountSmoothing(d time.Duration) CountOption {
	return func(c *countConfig, ch *checker) { ch.smoothing("WithCountSmoothing", d, &c.tau) }
}

// WithCountSource sets the reader of the count and its limit. Default: as
// the constructor says. A limit ≤ 0 or an error gives no reading. nil
// restores the default.
func WithCountSource(read func() (n, limit int64, err error)) CountOption {
	return func(c *countConfig, _ *checker) {
		if read != nil {
			c.read = read
		}
	}
}

func newCount(name string, cfg countConfig, opts []CountOption) *Count {
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	c := &Count{name: name, cfg: cfg, avg: smooth.EWMA{Tau: cfg.tau}}
	c.target.store(cfg.target)
	c.value.store(math.NaN())
	c.reading = CountReading{Value: math.NaN()}
	return c
}

// NewGoroutines returns a signal of the live goroutines
// (runtime.NumGoroutine) against ceiling, with Name "goroutines" and a
// default Target of 0.9. A goroutine costs at least a 2 KiB stack, and a
// server spends one or more per connection and request: the ceiling is
// the count the service is sized for (for example its memory limit ÷ the
// memory a request holds). It panics with a "pressure: ..." message if
// ceiling < 1 or an option is out of range, a programming error. A sample
// costs about 0.1 µs.
func NewGoroutines(ceiling int, opts ...CountOption) *Count {
	var ch checker
	ch.check(ceiling >= 1, "NewGoroutines", "the ceiling must be ≥ 1", ceiling)
	ch.mustValid()
	cfg := countConfig{target: 0.9, period: 100 * time.Millisecond,
		read: func() (int64, int64, error) { return int64(runtime.NumGoroutine()), int64(ceiling), nil }}
	return newCount("goroutines", cfg, opts)
}

// NewOpenFiles returns a signal of this process's open file descriptors
// against its RLIMIT_NOFILE soft limit, with Name "open_files" and a
// default Target of 0.8. On Linux it counts the entries of /proc/self/fd
// in one reused buffer, without a name or an allocation per descriptor
// (about 13 µs for a test process's dozen descriptors, BenchmarkSample;
// once a second by default); elsewhere it reads nothing and its Value
// stays NaN. It panics with a "pressure: ..." message on an
// out-of-range option, a programming error.
func NewOpenFiles(opts ...CountOption) *Count {
	cfg := countConfig{target: 0.8, period: time.Second, read: openFiles()}
	return newCount("open_files", cfg, opts)
}

// Name returns "goroutines" or "open_files".
func (c *Count) Name() string { return c.name }

// Value returns the count ÷ the limit, NaN without a reading.
func (c *Count) Value() float64 { return c.value.load() }

// Target returns the fraction of the limit the controller steers to.
func (c *Count) Target() float64 { return c.target.load() }

// Period returns Run's sampling period.
func (c *Count) Period() time.Duration { return c.cfg.period }

// CountReading is the detail of the latest sample.
type CountReading struct {
	Time time.Time
	// Value is what Value returns.
	Value float64
	// Count and Limit are the figures it divides.
	Count, Limit int64
	// Err is why the latest sample could not be read (nil when it was).
	Err error
}

// Reading returns the detail of the latest sample.
func (c *Count) Reading() CountReading {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reading
}

// SampleAt takes a sample at now. A sample less than half a period after
// the previous one is skipped.
func (c *Count) SampleAt(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	dt, ok := advance(&c.lastAt, now, c.cfg.period)
	if !ok {
		return
	}
	n, limit, err := c.cfg.read()
	r := CountReading{Time: now, Value: math.NaN(), Count: n, Limit: limit, Err: err}
	if err == nil && limit > 0 && n >= 0 {
		r.Value = c.avg.Update(float64(n)/float64(limit), dt)
	}
	c.value.store(r.Value)
	c.reading = r
}

// Run samples every Period with real time until ctx is done.
func (c *Count) Run(ctx context.Context) { run(ctx, c.cfg.period, c.SampleAt) }
