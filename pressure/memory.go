package pressure

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/cgroup"
	"github.com/levee-dev/levee/internal/smooth"
)

// Memory is how close this process is to its memory limit, as a fraction
// of it: 1 means the limit is reached (the runtime collects without pause
// at GOMEMLIMIT; the kernel kills at the cgroup's memory.max). It
// implements levee.Signal with Name "memory" and a default Target of 0.8.
//
// Each sample computes
//
//	in use  = live heap (marked by the last GC) + the runtime's memory
//	          outside heap objects (stacks, metadata): what no GC can free
//	peak    = the GC's heap goal + the same: what the process grows to
//	          before its next collection
//	limit   = the tighter of GOMEMLIMIT (runtime/debug.SetMemoryLimit) and
//	          the cgroup's memory.max / memory.high (v1
//	          memory.limit_in_bytes), re-read every second
//	Value   = max(in use ÷ limit, peak ÷ cgroup limit)
//
// The peak term applies to the cgroup limit only: the runtime keeps its
// heap within GOMEMLIMIT by collecting more often, but it does not know the
// kernel's limit unless GOMEMLIMIT says it, and without GOMEMLIMIT a heap
// of live bytes grows to twice that (GOGC=100) before the next collection.
// Other processes in the cgroup and the page cache are not counted (the
// page cache is reclaimable; reading memory.current would make a service
// that serves files look full). With neither limit Value is NaN: there is
// nothing to protect against, and Reading says so.
//
// The live heap changes at each GC cycle, not with each request, so the
// value lags admission by up to a cycle; a controller should not take it
// for a rate (see the package documentation). A sample reads
// runtime/metrics (about 4 µs, one allocation-free read; the cgroup limit,
// re-read once a second, about 100 µs: BenchmarkSample). Value and Target
// are atomic reads; safe for concurrent use.
type Memory struct {
	cfg    memConfig
	cg     *cgroup.Memory
	cgErr  error
	source string
	target atomicFloat
	value  atomicFloat

	mu        sync.Mutex
	lastAt    time.Time
	avg       smooth.EWMA
	limit     cgroup.MemoryLimit
	limitAt   time.Time
	haveLimit bool
	limitErr  error
	reading   MemoryReading
}

var _ levee.Signal = (*Memory)(nil)

// MemoryStats is what the runtime says about this process's memory, in
// bytes; WithMemoryStats injects a fake.
type MemoryStats struct {
	// Live is the heap occupied by objects the previous GC marked live.
	Live uint64
	// NonHeap is the runtime's memory outside heap objects that no GC
	// frees: goroutine stacks, runtime metadata, profiling buckets.
	NonHeap uint64
	// Goal is the heap size the GC aims to end its current cycle at.
	Goal uint64
	// GoLimit is GOMEMLIMIT, math.MaxInt64 when unset.
	GoLimit uint64
}

type memConfig struct {
	target float64
	period time.Duration
	tau    time.Duration
	fsys   fs.FS
	stats  func() MemoryStats
}

// MemoryOption configures a Memory signal.
type MemoryOption func(*memConfig, *checker)

// WithMemoryTarget sets the fraction of the limit the controller steers
// to. Default 0.8; range (0, 1]; 0 means the default.
func WithMemoryTarget(f float64) MemoryOption {
	return func(c *memConfig, ch *checker) {
		set(ch, &c.target, f, f > 0 && f <= 1, "WithMemoryTarget", "must be in (0, 1] (0 means the default, 0.8)")
	}
}

// WithMemoryPeriod sets how often Run samples. Default 100ms; range
// [10ms, 1m]; 0 means the default.
func WithMemoryPeriod(d time.Duration) MemoryOption {
	return func(c *memConfig, ch *checker) { ch.period("WithMemoryPeriod", d, &c.period) }
}

// WithMemorySmoothing sets the EWMA time constant of the value. Default 0
// (none: the live heap already moves once per GC cycle); range [0, 1m].
func WithMemorySmoothing(d time.Duration) MemoryOption {
	return func(c *memConfig, ch *checker) { ch.smoothing("WithMemorySmoothing", d, &c.tau) }
}

// WithMemoryCgroupFS sets the filesystem in which /proc/self/cgroup,
// /proc/self/mountinfo and the cgroup files are read, rooted at "/".
// Default os.DirFS("/"); tests pass a fixture tree. nil disables the
// cgroup limit: only GOMEMLIMIT counts.
func WithMemoryCgroupFS(fsys fs.FS) MemoryOption {
	return func(c *memConfig, _ *checker) { c.fsys = fsys }
}

// WithMemoryStats sets the reader of the runtime's memory figures.
// Default: runtime/metrics. nil restores the default.
func WithMemoryStats(f func() MemoryStats) MemoryOption {
	return func(c *memConfig, _ *checker) {
		if f != nil {
			c.stats = f
		}
	}
}

// NewMemory returns a memory signal. It locates the cgroup memory
// controller once; without one (not Linux, no cgroup filesystem) only
// GOMEMLIMIT counts, and Reading().Source says why. It panics with a
// "pressure: ..." message on an out-of-range option, a programming error.
func NewMemory(opts ...MemoryOption) *Memory {
	cfg := memConfig{target: 0.8, period: 100 * time.Millisecond, fsys: os.DirFS("/")}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	if cfg.stats == nil {
		cfg.stats = runtimeMemoryStats()
	}
	m := &Memory{cfg: cfg, avg: smooth.EWMA{Tau: cfg.tau}}
	if cfg.fsys != nil {
		m.cg, m.cgErr = cgroup.FindMemory(cfg.fsys)
	} else {
		m.cgErr = errors.New("pressure: cgroup lookup disabled")
	}
	if m.cg != nil {
		m.source = "runtime/metrics against min(GOMEMLIMIT, " + m.cg.String() + ")"
	} else {
		m.source = "runtime/metrics against GOMEMLIMIT (no cgroup: " + m.cgErr.Error() + ")"
	}
	m.target.store(cfg.target)
	m.value.store(math.NaN())
	m.reading = MemoryReading{Value: math.NaN(), Source: m.source}
	return m
}

var memoryMetrics = [...]string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/gc/heap/goal:bytes",
	"/gc/gomemlimit:bytes",
}

func runtimeMemoryStats() func() MemoryStats {
	samples := make([]metrics.Sample, len(memoryMetrics))
	for i, n := range memoryMetrics {
		samples[i].Name = n
	}
	return func() MemoryStats {
		metrics.Read(samples)
		var v [len(memoryMetrics)]uint64
		for i, s := range samples {
			if s.Value.Kind() == metrics.KindUint64 {
				v[i] = s.Value.Uint64()
			}
		}
		heap := v[2] + v[3] + v[4] + v[5]
		st := MemoryStats{Live: v[0], Goal: v[6], GoLimit: v[7]}
		if v[1] > heap {
			st.NonHeap = v[1] - heap
		}
		return st
	}
}

// Name returns "memory".
func (m *Memory) Name() string { return "memory" }

// Value returns the fraction of the memory limit in use (see Memory), NaN
// before the first sample and when there is no limit.
func (m *Memory) Value() float64 { return m.value.load() }

// Target returns the fraction the controller steers to (default 0.8).
func (m *Memory) Target() float64 { return m.target.load() }

// Period returns Run's sampling period.
func (m *Memory) Period() time.Duration { return m.cfg.period }

// MemoryReading is the detail of the latest sample, for reports, the
// status page and an overload-action layer.
type MemoryReading struct {
	Time time.Time
	// Value is what Value returns.
	Value float64
	// InUse and Peak are in bytes (see Memory).
	InUse, Peak uint64
	// Limit is the binding limit in bytes, 0 when there is none;
	// GoLimit and CgroupLimit its two sources (0 when unset).
	Limit, GoLimit, CgroupLimit uint64
	// Source describes where the numbers come from.
	Source string
	// Err is the last error met reading the cgroup limit (nil when all
	// went well); the limit falls back to GOMEMLIMIT.
	Err error
}

// Reading returns the detail of the latest sample.
func (m *Memory) Reading() MemoryReading {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reading
}

// SampleAt takes a sample at now: it reads the runtime's figures and, at
// most once a second, the cgroup limit. A sample less than half a period
// after the previous one is skipped.
func (m *Memory) SampleAt(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dt, ok := advance(&m.lastAt, now, m.cfg.period)
	if !ok {
		return
	}
	if m.cg != nil && (!m.haveLimit || now.Sub(m.limitAt) >= time.Second || now.Before(m.limitAt)) {
		l, err := m.cg.Limit()
		if err != nil {
			l = cgroup.MemoryLimit{Max: -1, High: -1} // not trusted: GOMEMLIMIT alone
		}
		m.limit, m.limitAt, m.haveLimit, m.limitErr = l, now, true, err
	}
	st := m.cfg.stats()
	r := MemoryReading{Time: now, Source: m.source, Err: m.limitErr,
		InUse: st.Live + st.NonHeap, Peak: st.Goal + st.NonHeap}
	if st.GoLimit > 0 && st.GoLimit < math.MaxInt64 {
		r.GoLimit = st.GoLimit
	}
	if b := m.limit.Bytes(); b > 0 {
		r.CgroupLimit = uint64(b)
	}
	raw := math.NaN()
	switch {
	case r.GoLimit > 0 && (r.CgroupLimit == 0 || r.GoLimit <= r.CgroupLimit):
		// The runtime keeps its heap within GOMEMLIMIT, which binds.
		r.Limit = r.GoLimit
		raw = float64(r.InUse) / float64(r.GoLimit)
	case r.CgroupLimit > 0:
		// The runtime does not know the kernel's limit: what the heap grows
		// to before the next collection must fit under it too.
		r.Limit = r.CgroupLimit
		raw = float64(max(r.InUse, r.Peak)) / float64(r.CgroupLimit)
	}
	r.Value = raw
	if !math.IsNaN(raw) {
		r.Value = m.avg.Update(raw, dt)
	}
	m.value.store(r.Value)
	m.reading = r
}

// Run samples every Period with real time until ctx is done.
func (m *Memory) Run(ctx context.Context) { run(ctx, m.cfg.period, m.SampleAt) }
