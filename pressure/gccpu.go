package pressure

import (
	"context"
	"math"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/smooth"
)

// GCCPU is the share of the CPU available to Go code (GOMAXPROCS × wall
// time) that the garbage collector took over the last period: mark
// assists, dedicated and fractional mark workers and pauses, not the idle
// marking that uses CPU nothing else wanted. It implements levee.Signal
// with Name "gc_cpu" and a default Target of 0.3.
//
// A Go process near its memory limit spends its CPU collecting before it
// runs out: the heap goal shrinks towards the live heap, cycles follow
// each other without pause and, past GOMEMLIMIT, the runtime's limiter
// lets the GC take up to half of the CPU. Measured on the build machine
// (GOMAXPROCS=2, every P allocating 1 KiB objects as fast as it can with
// 32 MiB live): 0.01–0.16 per 50 ms, 0.06–0.08 averaged over a second,
// with or without a GOMEMLIMIT just above the live heap. The default
// target leaves room for such services and trips when collection
// dominates.
//
// The figures are the runtime's own estimates (/cpu/classes/gc/total
// minus /cpu/classes/gc/mark/idle, over /cpu/classes/total), smoothed by
// an EWMA (default 1 s: cycles are bursts). A sample reads
// runtime/metrics (about 0.3 µs, no allocation: BenchmarkSample). Value is NaN until two samples have been taken. Safe for
// concurrent use.
type GCCPU struct {
	cfg    gcConfig
	target atomicFloat
	value  atomicFloat

	mu       sync.Mutex
	lastAt   time.Time
	avg      smooth.EWMA
	prevGC   float64
	prevAll  float64
	havePrev bool
	reading  GCReading
}

var _ levee.Signal = (*GCCPU)(nil)

type gcConfig struct {
	target float64
	period time.Duration
	tau    time.Duration
	read   func() (gc, total float64)
}

// GCOption configures a GCCPU signal.
type GCOption func(*gcConfig, *checker)

// WithGCTarget sets the GC's share of the CPU the controller steers to.
// Default 0.3; range (0, 1]; 0 means the default.
func WithGCTarget(f float64) GCOption {
	return func(c *gcConfig, ch *checker) {
		set(ch, &c.target, f, f > 0 && f <= 1, "WithGCTarget", "must be in (0, 1] (0 means the default, 0.3)")
	}
}

// WithGCPeriod sets how often Run samples. Default 100ms; range [10ms, 1m];
// 0 means the default.
func WithGCPeriod(d time.Duration) GCOption {
	return func(c *gcConfig, ch *checker) { ch.period("WithGCPeriod", d, &c.period) }
}

// WithGCSmoothing sets the EWMA time constant of the value. Default 1s; 0
// disables smoothing; range [0, 1m].
func WithGCSmoothing(d time.Duration) GCOption {
	return func(c *gcConfig, ch *checker) { ch.smoothing("WithGCSmoothing", d, &c.tau) }
}

// WithGCSource sets the reader of the cumulative GC CPU time (without idle
// marking) and the cumulative CPU time available, in seconds. Default:
// runtime/metrics. nil restores the default.
func WithGCSource(read func() (gc, total float64)) GCOption {
	return func(c *gcConfig, _ *checker) {
		if read != nil {
			c.read = read
		}
	}
}

// NewGCCPU returns a GC CPU signal. It panics with a "pressure: ..."
// message on an out-of-range option, a programming error.
func NewGCCPU(opts ...GCOption) *GCCPU {
	cfg := gcConfig{target: 0.3, period: 100 * time.Millisecond, tau: time.Second}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	if cfg.read == nil {
		cfg.read = runtimeGCCPU()
	}
	g := &GCCPU{cfg: cfg, avg: smooth.EWMA{Tau: cfg.tau}}
	g.target.store(cfg.target)
	g.value.store(math.NaN())
	g.reading = GCReading{Value: math.NaN(), Raw: math.NaN()}
	return g
}

func runtimeGCCPU() func() (gc, total float64) {
	samples := []metrics.Sample{
		{Name: "/cpu/classes/gc/total:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/idle:cpu-seconds"},
		{Name: "/cpu/classes/total:cpu-seconds"},
	}
	return func() (gc, total float64) {
		metrics.Read(samples)
		var v [3]float64
		for i, s := range samples {
			if s.Value.Kind() == metrics.KindFloat64 {
				v[i] = s.Value.Float64()
			}
		}
		return v[0] - v[1], v[2]
	}
}

// Name returns "gc_cpu".
func (g *GCCPU) Name() string { return "gc_cpu" }

// Value returns the smoothed GC share of the available CPU, NaN before the
// second sample.
func (g *GCCPU) Value() float64 { return g.value.load() }

// Target returns the share the controller steers to (default 0.3).
func (g *GCCPU) Target() float64 { return g.target.load() }

// Period returns Run's sampling period.
func (g *GCCPU) Period() time.Duration { return g.cfg.period }

// GCReading is the detail of the latest sample.
type GCReading struct {
	Time time.Time
	// Value is what Value returns; Raw the share of the last period.
	Value, Raw float64
}

// Reading returns the detail of the latest sample.
func (g *GCCPU) Reading() GCReading {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reading
}

// SampleAt takes a sample at now. A sample less than half a period after
// the previous one is skipped; counters that went backwards restart from a
// new baseline.
func (g *GCCPU) SampleAt(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	dt, ok := advance(&g.lastAt, now, g.cfg.period)
	if !ok {
		return
	}
	gc, all := g.cfg.read()
	dGC, dAll := gc-g.prevGC, all-g.prevAll
	valid := g.havePrev && dAll > 0 && dGC >= 0
	g.prevGC, g.prevAll, g.havePrev = gc, all, true
	if !valid {
		return
	}
	raw := math.Min(1, dGC/dAll)
	v := g.avg.Update(raw, dt)
	g.value.store(v)
	g.reading = GCReading{Time: now, Value: v, Raw: raw}
}

// Run samples every Period with real time until ctx is done.
func (g *GCCPU) Run(ctx context.Context) { run(ctx, g.cfg.period, g.SampleAt) }
