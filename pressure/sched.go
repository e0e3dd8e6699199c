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

// schedMetric is the runtime/metrics histogram of the time goroutines spend
// runnable before they run.
const schedMetric = "/sched/latencies:seconds"

// runnableMetric is the runtime/metrics count of goroutines ready to run
// and waiting for a P (Go 1.26 on).
const runnableMetric = "/sched/goroutines/runnable:goroutines"

// SchedLatency is a percentile (default p99) of the Go scheduler latency —
// how long goroutines waited in a run queue before running — over the last
// sample period, in seconds. It implements levee.Signal with Name
// "sched_latency" and a default Target of 50 ms.
//
// It sees overload that CPU misses: a VM whose host gives it fewer cores
// than it believes it has, or GOMAXPROCS above the cores actually granted,
// shows low CPU and long run queues. Each sample reads the cumulative
// runtime/metrics histogram, subtracts the previous one and takes the
// percentile of the difference (interpolated inside the bucket), so the
// value is about the last period only; a period in which no goroutine was
// scheduled reads 0. Value is that reading smoothed by an EWMA
// (WithSchedSmoothing), NaN until two samples have been taken.
//
// Safe for concurrent use.
type SchedLatency struct {
	cfg    schedConfig
	target atomicFloat
	value  atomicFloat

	mu       sync.Mutex
	prev     []uint64
	lastAt   time.Time
	avg      smooth.EWMA
	reading  SchedReading
	runnable []metrics.Sample // Unread's buffer
}

var _ levee.Signal = (*SchedLatency)(nil)

type schedConfig struct {
	target float64
	p      float64
	period time.Duration
	tau    time.Duration
	read   func() *metrics.Float64Histogram
	// queued reads the goroutines waiting for a P (ok false: unknown).
	// Tests in the package replace it.
	queued func(buf *[]metrics.Sample) (n float64, ok bool)
}

// SchedOption configures a SchedLatency.
type SchedOption func(*schedConfig, *checker)

// WithSchedTarget sets the latency the controller steers to. Default 50ms
// (five of Go's 10 ms preemption slices: requests that burn more than
// 10 ms of CPU each lengthen the run queue wait even at moderate load, so
// keep the target above twice the longest CPU-bound request); range
// (0, 10s]; 0 means the default.
func WithSchedTarget(d time.Duration) SchedOption {
	return func(c *schedConfig, ch *checker) {
		if d == 0 {
			return
		}
		ch.check(d > 0 && d <= 10*time.Second, "WithSchedTarget", "must be in (0, 10s] (0 means the default, 50ms)", d)
		c.target = d.Seconds()
	}
}

// WithSchedPercentile sets the percentile of the per-period histogram.
// Default 0.99; range (0, 1]; 0 means the default.
func WithSchedPercentile(p float64) SchedOption {
	return func(c *schedConfig, ch *checker) {
		set(ch, &c.p, p, p > 0 && p <= 1, "WithSchedPercentile", "must be in (0, 1] (0 means the default, 0.99)")
	}
}

// WithSchedPeriod sets how often Run samples. Default 50ms (see
// setPeriod); range [10ms, 1m]; 0 means the default.
func WithSchedPeriod(d time.Duration) SchedOption {
	return func(c *schedConfig, ch *checker) { ch.period("WithSchedPeriod", d, &c.period) }
}

// WithSchedSmoothing sets the EWMA time constant applied to the per-period
// percentile. Default 50ms (see setPeriod); 0 disables smoothing; range
// [0, 1m].
func WithSchedSmoothing(d time.Duration) SchedOption {
	return func(c *schedConfig, ch *checker) { ch.smoothing("WithSchedSmoothing", d, &c.tau) }
}

// WithSchedSource sets the reader of the cumulative scheduler latency
// histogram (seconds). Default: runtime/metrics "/sched/latencies:seconds".
// Tests inject a fake. The reader may reuse the histogram it returns; nil
// restores the default.
func WithSchedSource(read func() *metrics.Float64Histogram) SchedOption {
	return func(c *schedConfig, _ *checker) { c.read = read }
}

// NewSchedLatency returns a scheduler latency signal. It panics with a
// "pressure: ..." message on an out-of-range option, a programming error
// (as time.NewTicker does for a non-positive period).
func NewSchedLatency(opts ...SchedOption) *SchedLatency {
	cfg := schedConfig{target: 0.05, p: 0.99, period: setPeriod, tau: setPeriod}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	if cfg.read == nil {
		cfg.read = runtimeSchedLatencies()
	}
	if cfg.queued == nil {
		cfg.queued = runtimeRunnable
	}
	s := &SchedLatency{cfg: cfg, avg: smooth.EWMA{Tau: cfg.tau}}
	s.target.store(cfg.target)
	s.value.store(math.NaN())
	s.reading = SchedReading{Value: math.NaN(), Raw: math.NaN()}
	return s
}

func runtimeSchedLatencies() func() *metrics.Float64Histogram {
	samples := []metrics.Sample{{Name: schedMetric}}
	return func() *metrics.Float64Histogram {
		metrics.Read(samples)
		if samples[0].Value.Kind() != metrics.KindFloat64Histogram {
			return nil
		}
		return samples[0].Value.Float64Histogram()
	}
}

// runtimeRunnable reads runnableMetric into buf (allocated on first use).
func runtimeRunnable(buf *[]metrics.Sample) (float64, bool) {
	if *buf == nil {
		*buf = []metrics.Sample{{Name: runnableMetric}}
	}
	metrics.Read(*buf)
	if v := (*buf)[0].Value; v.Kind() == metrics.KindUint64 {
		return float64(v.Uint64()), true
	}
	return 0, false
}

// Unread returns the number of goroutines ready to run that wait for a
// processor now (read when called, not at the last sample; NaN where the
// runtime does not count them). On a server that runs a goroutine per
// connection (net/http's HTTP/1), a connection whose next request has
// arrived is such a goroutine until it gets a processor: while the
// process is saturated, demand waits there unread, where no count of
// arrivals sees it, and the admission controller (package admit) adds
// the growth of this count to the arrivals it counts. The count also
// holds every other goroutine waiting for a processor (handlers the
// scheduler preempted, background work): the controller subtracts the
// handlers it is running and uses only the count's change while it is
// overloaded, whose sum over any stretch is bounded by the count itself.
// The read takes the scheduler's lock for a moment (it visits every P's
// run queue): call it once a control period, not per request.
func (s *SchedLatency) Unread() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.cfg.queued(&s.runnable)
	if !ok {
		return math.NaN()
	}
	return n
}

// Name returns "sched_latency".
func (s *SchedLatency) Name() string { return "sched_latency" }

// Value returns the smoothed percentile in seconds, NaN before the second
// sample.
func (s *SchedLatency) Value() float64 { return s.value.load() }

// Target returns the target latency in seconds (default 0.05).
func (s *SchedLatency) Target() float64 { return s.target.load() }

// Period returns the sampling period of Run.
func (s *SchedLatency) Period() time.Duration { return s.cfg.period }

// SchedReading is the detail of the latest scheduler latency sample.
type SchedReading struct {
	Time time.Time
	// Value is the smoothed percentile, seconds.
	Value float64
	// Raw is the percentile of the last period, seconds.
	Raw float64
	// Count is the number of goroutine schedulings in the last period.
	Count uint64
}

// Reading returns the detail of the latest sample.
func (s *SchedLatency) Reading() SchedReading {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reading
}

// SampleAt reads the histogram and updates the value with the percentile of
// what changed since the previous sample. A sample less than half a period
// after the previous one is skipped; a histogram whose shape changed (or a counter
// that went backwards) restarts from a new baseline.
func (s *SchedLatency) SampleAt(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.lastAt.IsZero() && tooSoon(now, s.lastAt, s.cfg.period) {
		return
	}
	h := s.cfg.read()
	if h == nil || len(h.Buckets) != len(h.Counts)+1 {
		return
	}
	first := s.prev == nil || len(s.prev) != len(h.Counts)
	var total uint64
	if !first {
		for i, c := range h.Counts {
			if c < s.prev[i] {
				first = true
				break
			}
			total += c - s.prev[i]
		}
	}
	raw := 0.0
	if !first && total > 0 {
		raw = percentile(h, s.prev, total, s.cfg.p)
	}
	if len(s.prev) != len(h.Counts) {
		s.prev = make([]uint64, len(h.Counts))
	}
	copy(s.prev, h.Counts)
	dt := now.Sub(s.lastAt)
	s.lastAt = now
	if first {
		return
	}
	v := s.avg.Update(raw, dt)
	s.value.store(v)
	s.reading = SchedReading{Time: now, Value: v, Raw: raw, Count: total}
}

// percentile returns the p-quantile of h.Counts − prev (total events),
// interpolating linearly inside the bucket that holds it.
func percentile(h *metrics.Float64Histogram, prev []uint64, total uint64, p float64) float64 {
	rank := p * float64(total)
	var cum float64
	for i, c := range h.Counts {
		n := float64(c - prev[i])
		if n == 0 || cum+n < rank {
			cum += n
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		switch {
		case math.IsInf(hi, 1):
			return lo
		case math.IsInf(lo, -1):
			return math.Max(0, hi)
		}
		return lo + (hi-lo)*(rank-cum)/n
	}
	return 0
}

// Run samples every Period with real time until ctx is done.
func (s *SchedLatency) Run(ctx context.Context) { run(ctx, s.cfg.period, s.SampleAt) }
