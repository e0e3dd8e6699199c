package pressure

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/cgroup"
	"github.com/levee-dev/levee/internal/smooth"
)

// CPU is the CPU time used by this process as a fraction of the cores it may
// use: 1.0 means every core it is allowed is busy with its work. It
// implements levee.Signal with Name "cpu" and a default Target of 0.95
// (see defaultCPUTarget).
//
// Each sample computes, over the time since the previous sample,
//
//	process = Δ(this process's CPU time [+ run-queue wait, WithRunQueueWait]) / (Δwall × allowed cores)
//	allowed = min(GOMAXPROCS, affinity CPUs, cgroup quota ÷ period, cpuset size)
//	group   = Δ(quota cgroup's CPU time) / (Δwall × quota cores)   (only when a quota is set)
//	raw     = max(process, group)
//
// and Value is raw smoothed by an EWMA (WithCPUSmoothing). The process's CPU
// time comes from getrusage(RUSAGE_SELF) (user + system, all threads); see
// the package documentation for why the denominator and the numerator are
// chosen this way. Value is NaN until two samples have been taken.
//
// A CPU is safe for concurrent use: Value and Target are atomic reads;
// SampleAt calls are serialised.
type CPU struct {
	cfg    cpuConfig
	cg     *cgroup.CPU
	cgErr  error
	target atomicFloat
	value  atomicFloat

	mu        sync.Mutex
	lastAt    time.Time
	lastSelf  time.Duration
	lastGroup time.Duration
	lastWait  time.Duration
	waitOK    bool   // lastWait is a valid baseline
	groupDir  string // QuotaDir of lastGroup; "" when not read
	limit     cgroup.Limit
	limitAt   time.Time
	haveLimit bool
	limitErr  error // why the limit fell back to GOMAXPROCS, until it reads again
	avg       smooth.EWMA
	reading   CPUReading
}

var _ levee.Signal = (*CPU)(nil)

type cpuConfig struct {
	target  float64
	period  time.Duration
	tau     time.Duration
	fsys    fs.FS
	usage   func() (time.Duration, error)
	procs   func() int
	refresh time.Duration
	waitOn  bool
	wait    func() (time.Duration, error) // cumulative run-queue wait; nil = off
}

// CPUOption configures a CPU signal.
type CPUOption func(*cpuConfig, *checker)

// WithCPUTarget sets the utilisation the admission controller steers to.
// Default 0.95 (see defaultCPUTarget); unit: fraction of the allowed cores;
// range (0, 2]; 0 means the default.
func WithCPUTarget(f float64) CPUOption {
	return func(c *cpuConfig, ch *checker) {
		set(ch, &c.target, f, f > 0 && f <= 2, "WithCPUTarget", "must be in (0, 2] (0 means the default, 0.95)")
	}
}

// WithCPUPeriod sets how often Run samples. Default 50ms (see setPeriod);
// range [10ms, 1m]; 0 means the default.
// Shorter periods react faster and are noisier (the kernel accounts CPU time
// precisely, so 10 ms is usable but jumpy).
func WithCPUPeriod(d time.Duration) CPUOption {
	return func(c *cpuConfig, ch *checker) { ch.period("WithCPUPeriod", d, &c.period) }
}

// WithCPUSmoothing sets the EWMA time constant applied to the raw
// utilisation: a step change is 63% reflected after d. Default 50ms (see
// setPeriod); 0 disables smoothing; range [0, 1m].
func WithCPUSmoothing(d time.Duration) CPUOption {
	return func(c *cpuConfig, ch *checker) { ch.smoothing("WithCPUSmoothing", d, &c.tau) }
}

// WithCgroupFS sets the filesystem in which /proc/self/cgroup,
// /proc/self/mountinfo and the cgroup files are read, rooted at "/".
// Default os.DirFS("/"); tests pass a fixture tree. nil disables cgroup
// lookup: the denominator is then GOMAXPROCS alone.
func WithCgroupFS(fsys fs.FS) CPUOption {
	return func(c *cpuConfig, _ *checker) { c.fsys = fsys }
}

// WithProcessCPU sets the reader of this process's cumulative CPU time
// (user + system). Default getrusage(RUSAGE_SELF); tests inject a fake that
// follows a virtual clock. nil restores the default.
func WithProcessCPU(f func() (time.Duration, error)) CPUOption {
	return func(c *cpuConfig, _ *checker) {
		if f != nil {
			c.usage = f
		}
	}
}

// WithMaxProcs sets the function returning the number of cores the Go
// runtime may run code on. Default min(runtime.GOMAXPROCS(0),
// runtime.NumCPU()): GOMAXPROCS set by hand above the CPUs of the
// process's affinity mask (taskset) cannot make them usable. Since Go 1.25 the
// default GOMAXPROCS follows the cgroup quota, but rounded up and at least
// 2 (a 0.5-core container still gets GOMAXPROCS=2), which is why the quota
// itself is read too. It is called on every sample; results below 1 count
// as 1. nil restores the default.
func WithMaxProcs(f func() int) CPUOption {
	return func(c *cpuConfig, _ *checker) {
		if f != nil {
			c.procs = f
		}
	}
}

// WithRunQueueWait makes the signal count, besides the CPU time this
// process used, the time its threads spent runnable in the kernel's run
// queue without getting a CPU (schedstat run_delay, summed over
// /proc/self/task/*/schedstat; Linux only). The value then measures the
// CPU the process asked for rather than the CPU it got: on a host whose
// other processes compete for the same cores (no quota protects this one),
// a process that gets half a core while it wants two reads 2, not 0.5.
// Time stolen by a hypervisor is invisible to the guest kernel and not
// counted; the scheduler latency signal sees that case. Default false
// (Value is CPU used ÷ allowed cores, as documented on CPU); reading costs
// one file per thread per sample.
func WithRunQueueWait(on bool) CPUOption {
	return func(c *cpuConfig, _ *checker) { c.waitOn = on }
}

// NewCPU returns a CPU signal. It locates the cgroup CPU controller once
// (see package internal/cgroup); when there is none, or its files cannot be
// read, it falls back to GOMAXPROCS as the denominator and says so in
// Reading().Source. The only errors are option values out of their
// documented range.
func NewCPU(opts ...CPUOption) (*CPU, error) {
	cfg := cpuConfig{
		target:  defaultCPUTarget,
		period:  setPeriod,
		tau:     setPeriod,
		fsys:    os.DirFS("/"),
		usage:   ProcessCPU,
		procs:   func() int { return min(runtime.GOMAXPROCS(0), runtime.NumCPU()) },
		refresh: time.Second,
	}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	if ch.err != nil {
		return nil, ch.err
	}
	if cfg.waitOn && cfg.wait == nil {
		fsys := cfg.fsys
		if fsys == nil {
			fsys = os.DirFS("/")
		}
		cfg.wait = newRunQueueWait(fsys).read
	}
	c := &CPU{cfg: cfg, avg: smooth.EWMA{Tau: cfg.tau}}
	c.target.store(cfg.target)
	c.value.store(math.NaN())
	if cfg.fsys != nil {
		c.cg, c.cgErr = cgroup.FindCPU(cfg.fsys)
	} else {
		c.cgErr = errors.New("pressure: cgroup lookup disabled")
	}
	c.reading = CPUReading{Value: math.NaN(), Raw: math.NaN(), Process: math.NaN(), Group: math.NaN(), Wait: math.NaN(), Source: c.source()}
	return c, nil
}

func (c *CPU) source() string {
	num := "getrusage"
	if c.cfg.wait != nil {
		num = "(getrusage + run-queue wait)"
	}
	if c.cg == nil {
		return num + " / GOMAXPROCS (no cgroup: " + c.cgErr.Error() + ")"
	}
	return num + " / min(GOMAXPROCS, " + c.cg.String() + ")"
}

// Name returns "cpu".
func (c *CPU) Name() string { return "cpu" }

// Value returns the smoothed utilisation of the allowed cores (0..1, a
// little above 1 when threads outside the Go scheduler, such as cgo calls,
// add work), or NaN before the second sample.
func (c *CPU) Value() float64 { return c.value.load() }

// Target returns the utilisation the controller steers to (default 0.95).
func (c *CPU) Target() float64 { return c.target.load() }

// Saturation returns 1, the reading at which every allowed core is busy.
// It marks CPU as a utilisation rather than a delay: a busy server reads
// near its target without anything waiting, so the admission controller
// takes it above its target for overload only when a delay signal
// confirms that work waits, or when it reads saturated (package admit,
// "How signals combine").
func (c *CPU) Saturation() float64 { return 1 }

// Period returns the sampling period of Run.
func (c *CPU) Period() time.Duration { return c.cfg.period }

// CPUReading is the detail of the latest CPU sample, for reports and
// debugging.
type CPUReading struct {
	// Time of the sample.
	Time time.Time
	// Value is the smoothed utilisation (what Value returns).
	Value float64
	// Raw is the unsmoothed max(Process + Wait, Group), Wait counted only
	// with WithRunQueueWait.
	Raw float64
	// Process is this process's utilisation of the allowed cores.
	Process float64
	// Wait is the kernel run-queue wait of this process's threads, in
	// allowed cores (see WithRunQueueWait); included in Raw when enabled,
	// NaN when disabled or unreadable.
	Wait float64
	// Group is the quota cgroup's utilisation of its quota; NaN when the
	// cgroup has no quota (its usage would count other processes, the
	// whole host at the root).
	Group float64
	// Cores is the denominator of Process: the cores this process may use.
	Cores float64
	// Bound names what sets Cores: "GOMAXPROCS", "cgroup quota" or "cpuset".
	Bound string
	// Source describes where the numbers come from.
	Source string
	// Err is the last error met while sampling (nil when all went well);
	// sampling carries on with what could be read.
	Err error
}

// Reading returns the detail of the latest sample.
func (c *CPU) Reading() CPUReading {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reading
}

// SampleAt takes a sample at now: it reads this process's CPU time and,
// at most once a second, the cgroup limits. A sample less than half a
// period after the previous one is skipped (the next one covers its time:
// a starved sampler that finds two ticks waiting must not compute a
// utilisation over microseconds). Run calls it with real time; tests and
// simulators call it with virtual time and fake readers.
func (c *CPU) SampleAt(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	self, err := c.cfg.usage()
	if err != nil {
		c.reading.Err = err
		return
	}
	first := c.lastAt.IsZero()
	dt, ok := advance(&c.lastAt, now, c.cfg.period)
	if !ok {
		return
	}
	if c.cg != nil && (!c.haveLimit || now.Sub(c.limitAt) >= c.cfg.refresh || now.Before(c.limitAt)) {
		l, err := c.cg.Limit()
		if err != nil {
			// A quota that cannot be parsed is not trusted: fall back to
			// GOMAXPROCS rather than guess.
			l = cgroup.Limit{Quota: cgroup.Quota{Quota: -1, Period: 100 * time.Millisecond}}
		}
		c.limit, c.limitAt, c.haveLimit, c.limitErr = l, now, true, err
	}
	c.reading.Err = c.limitErr

	cores, bound := float64(max(1, c.cfg.procs())), "GOMAXPROCS"
	if q := c.limit.Quota.Cores(); q < cores {
		cores, bound = q, "cgroup quota"
	}
	if n := float64(c.limit.CPUs); n > 0 && n < cores {
		cores, bound = n, "cpuset"
	}

	group, groupDir := time.Duration(0), ""
	if c.limit.QuotaDir != "" {
		g, err := c.cg.Usage(c.limit)
		if err != nil {
			c.reading.Err = err
		} else {
			group, groupDir = g, c.limit.QuotaDir
		}
	}

	wait, waitOK := time.Duration(0), false
	if c.cfg.wait != nil {
		w, err := c.cfg.wait()
		if err != nil {
			c.reading.Err = err
		} else {
			wait, waitOK = w, true
		}
	}
	dWait, haveWait := wait-c.lastWait, waitOK && c.waitOK
	c.lastWait, c.waitOK = wait, waitOK

	dSelf, dGroup := self-c.lastSelf, group-c.lastGroup
	haveGroup := groupDir != "" && groupDir == c.groupDir
	c.lastSelf, c.lastGroup, c.groupDir = self, group, groupDir
	if first {
		return
	}
	proc := math.Max(0, float64(dSelf)/float64(dt)/cores)
	grp, wt := math.NaN(), math.NaN()
	raw := proc
	if haveWait {
		wt = math.Max(0, float64(dWait)/float64(dt)/cores)
		raw += wt
	}
	if haveGroup {
		grp = math.Max(0, float64(dGroup)/float64(dt)/c.limit.Quota.Cores())
		raw = math.Max(raw, grp)
	}
	v := c.avg.Update(raw, dt)
	c.value.store(v)
	c.reading = CPUReading{
		Time: now, Value: v, Raw: raw, Process: proc, Group: grp, Wait: wt,
		Cores: cores, Bound: bound, Source: c.source(), Err: c.reading.Err,
	}
}

// Run samples every Period with real time until ctx is done, then returns.
// Start it with go c.Run(ctx); cancelling ctx stops it.
func (c *CPU) Run(ctx context.Context) { run(ctx, c.cfg.period, c.SampleAt) }
