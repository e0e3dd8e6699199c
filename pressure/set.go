package pressure

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/levee-dev/levee"
)

// Set is the recommended set of signals for a server, built by Default
// (for this process) or Simulated (for an instance on virtual time). Any
// member may be nil; members may be built by hand with other options:
//
//	cpu, err := pressure.NewCPU(pressure.WithCPUTarget(0.9))
//	set := &pressure.Set{CPU: cpu, Sched: pressure.NewSchedLatency(), Queue: pressure.NewQueueDelay()}
//
// A hand-built Set's queue-delay and concurrency signals learn nothing
// from its CPU unless their options say so (Default wires them: see
// Default).
//
// What the request path must call: Queue.Observe with each request's wait
// between its arrival and the start of its handler; Concurrency.StartAt
// when the handler starts (after the admission run queue), with the
// request's deadline budget, and DoneAt when it returns, with the time the
// request spent waiting on its caller (Drop for a hijacked or streaming
// request, Suspend and Resume around body reads). leveehttp does the
// first; see Concurrency for the rest.
type Set struct {
	CPU         *CPU
	Sched       *SchedLatency
	Queue       *QueueDelay
	Concurrency *Concurrency
	Memory      *Memory
	GC          *GCCPU
	Goroutines  *Count
	OpenFiles   *Count

	mu   sync.Mutex
	last map[levee.Signal]time.Time // SampleAt's latest sample of each member
}

// member is what a Set needs of each of its signals.
type member interface {
	levee.Signal
	SampleAt(now time.Time)
	Period() time.Duration
	Run(ctx context.Context)
}

// members returns the set's non-nil members in a fixed order: cpu,
// sched_latency, queue_delay, concurrency, memory, gc_cpu, goroutines,
// open_files.
func (s *Set) members() []member {
	out := make([]member, 0, 8)
	add := func(m member, ok bool) {
		if ok {
			out = append(out, m)
		}
	}
	add(s.CPU, s.CPU != nil)
	add(s.Sched, s.Sched != nil)
	add(s.Queue, s.Queue != nil)
	add(s.Concurrency, s.Concurrency != nil)
	add(s.Memory, s.Memory != nil)
	add(s.GC, s.GC != nil)
	add(s.Goroutines, s.Goroutines != nil)
	add(s.OpenFiles, s.OpenFiles != nil)
	return out
}

// setPeriod is the sampling period and EWMA time constant of the CPU and
// scheduler-latency signals and the sampling period of the concurrency
// signal: the admission controller's period (admit.DefaultPeriod). Its
// control law expects a reading to reflect admissions about two periods
// back; 100 ms samples with a 200 ms EWMA lag about six of its periods,
// enough for a limit cycle on a real server.
const setPeriod = 50 * time.Millisecond

// defaultCPUTarget is the CPU target. A one-core Go HTTP server spends
// more CPU per request at moderate load than near saturation (each request
// wakes an idle process; near saturation the poller batches): measured on
// the loopback harness with 1 ms requests, 0.62 of the core at 0.5× of its
// peak throughput and 0.85–0.9 at 0.7×. A target of 0.8 shed at 0.7× of
// what the core can serve; the simulator, which took 0.8 from NewCPU,
// capped a tier at 0.77 of its capacity. The queue that forms near 1.0 is
// what the scheduler-latency signal sees (p99 ≈ 1.5 ms at 0.7×, above
// 50 ms within 100 ms of a flood), so CPU need only say "nearly full".
const defaultCPUTarget = 0.95

// SetOption configures Default.
type SetOption func(*setConfig, *checker)

type setConfig struct {
	goroutines int
	without    map[string]bool
	cpu        []CPUOption
	sched      []SchedOption
	queue      []QueueOption
	conc       []ConcurrencyOption
	memory     []MemoryOption
	gc         []GCOption
	files      []CountOption
}

// WithoutSignals leaves the named signals (their Names: "cpu",
// "sched_latency", "queue_delay", "concurrency", "memory", "gc_cpu",
// "open_files", "goroutines") out of the set. Without "cpu" the queue
// delay and concurrency signals learn nothing from the CPU. An unknown
// name is an option error.
func WithoutSignals(names ...string) SetOption {
	return func(c *setConfig, ch *checker) {
		for _, n := range names {
			switch n {
			case "cpu", "sched_latency", "queue_delay", "concurrency", "memory", "gc_cpu", "open_files", "goroutines":
			default:
				ch.check(false, "WithoutSignals", "names a signal of the set", n)
			}
			if c.without == nil {
				c.without = map[string]bool{}
			}
			c.without[n] = true
		}
	}
}

// WithCPUOptions, WithSchedOptions, WithQueueOptions,
// WithConcurrencyOptions, WithMemoryOptions, WithGCOptions and
// WithOpenFilesOptions apply opts to that member of Default's set, after
// the set's own wiring (so WithQueueTarget fixes the learned queue target,
// WithQueueCPU replaces the CPU it learns from). A configuration builds
// its set this way, and stays Default's set in everything it does not
// say.
func WithCPUOptions(opts ...CPUOption) SetOption {
	return func(c *setConfig, _ *checker) { c.cpu = append(c.cpu, opts...) }
}

// WithSchedOptions: see WithCPUOptions.
func WithSchedOptions(opts ...SchedOption) SetOption {
	return func(c *setConfig, _ *checker) { c.sched = append(c.sched, opts...) }
}

// WithQueueOptions: see WithCPUOptions.
func WithQueueOptions(opts ...QueueOption) SetOption {
	return func(c *setConfig, _ *checker) { c.queue = append(c.queue, opts...) }
}

// WithConcurrencyOptions: see WithCPUOptions.
func WithConcurrencyOptions(opts ...ConcurrencyOption) SetOption {
	return func(c *setConfig, _ *checker) { c.conc = append(c.conc, opts...) }
}

// WithMemoryOptions: see WithCPUOptions.
func WithMemoryOptions(opts ...MemoryOption) SetOption {
	return func(c *setConfig, _ *checker) { c.memory = append(c.memory, opts...) }
}

// WithGCOptions: see WithCPUOptions.
func WithGCOptions(opts ...GCOption) SetOption {
	return func(c *setConfig, _ *checker) { c.gc = append(c.gc, opts...) }
}

// WithOpenFilesOptions: see WithCPUOptions.
func WithOpenFilesOptions(opts ...CountOption) SetOption {
	return func(c *setConfig, _ *checker) { c.files = append(c.files, opts...) }
}

// WithGoroutineLimit adds to the set a goroutines signal against ceiling
// (see NewGoroutines). Default: none (no ceiling is configured). Range
// [1, 1e9]; 0 means the default, none.
func WithGoroutineLimit(ceiling int) SetOption {
	return func(c *setConfig, ch *checker) {
		set(ch, &c.goroutines, ceiling, ceiling >= 1 && ceiling <= 1e9, "WithGoroutineLimit", "must be in [1, 1e9] (0 means the default, none)")
	}
}

// Default builds the recommended Set for admit.Controller, every signal
// with its defaults (one set of defaults: the constructors' are Default's):
//
//	cpu            target 0.95, sampled every 50 ms, 50 ms EWMA
//	sched_latency  p99, target 50 ms, every 50 ms, 50 ms EWMA
//	queue_delay    CoDel minimum over 100 ms, target learned from the CPU
//	               per request and the callers' budgets
//	concurrency    waiting in the handler, target 1, every 50 ms
//	memory         against GOMEMLIMIT / the cgroup limit, target 0.8
//	               (NaN without a limit), every 100 ms
//	gc_cpu         target 0.3, every 100 ms, 1 s EWMA
//	open_files     against RLIMIT_NOFILE, target 0.8, every second
//	goroutines     only with WithGoroutineLimit, target 0.9
//
// The queue-delay and concurrency signals learn from the CPU signal (the
// CPU time per request; the contention it explains) and the concurrency
// signal's callers' budgets, and stop learning upwards while another
// signal of the set reads above its target: overloaded latency never
// becomes the new normal. The concurrency signal reads NaN (no reading,
// ignored by admit) until the request path reports to it (see Set). The
// only errors are out-of-range options. Start
// sampling with go set.Run(ctx) and pass set.Signals() to the admission
// controller:
//
//	set, err := pressure.Default()
//	if err != nil { ... }
//	go set.Run(ctx)
//	ctl := admit.New(admit.WithSignals(set.Signals()...))
func Default(opts ...SetOption) (*Set, error) {
	var cfg setConfig
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	if err := ch.err; err != nil {
		return nil, err
	}
	c, err := NewCPU(cfg.cpu...)
	if err != nil {
		return nil, err
	}
	s := &Set{CPU: c, Sched: NewSchedLatency(cfg.sched...), Memory: NewMemory(cfg.memory...),
		GC: NewGCCPU(cfg.gc...), OpenFiles: NewOpenFiles(cfg.files...)}
	if cfg.goroutines > 0 {
		s.Goroutines = NewGoroutines(cfg.goroutines)
	}
	s.wire(cfg)
	s.drop(cfg.without)
	return s, nil
}

// Simulated builds Default's signals for a server that is not this
// process, on virtual time: a simulated instance whose cumulative busy CPU
// time cpuTime returns and which has cores() cores. It has the CPU,
// queue-delay and concurrency signals, wired as Default wires them;
// scheduler latency, memory, GC, goroutines and descriptors belong to the
// real process and are left out. cpuOpts apply to the CPU signal after
// the readers (a scenario's target or period). Drive it with SampleAt.
// The only errors are out-of-range options.
func Simulated(cpuTime func() (time.Duration, error), cores func() int, cpuOpts ...CPUOption) (*Set, error) {
	c, err := NewCPU(append([]CPUOption{WithCgroupFS(nil), WithProcessCPU(cpuTime), WithMaxProcs(cores)}, cpuOpts...)...)
	if err != nil {
		return nil, err
	}
	s := &Set{CPU: c}
	s.wire(setConfig{})
	return s, nil
}

// wire adds the queue-delay and concurrency signals, learning from the
// set's CPU signal and freezing while another member is above its target,
// then the configuration's own options.
func (s *Set) wire(cfg setConfig) {
	conc := []ConcurrencyOption{WithConcurrencyFreeze(s.overloadedBesides("concurrency"))}
	queue := []QueueOption{WithQueueFreeze(s.overloadedBesides("queue_delay"))}
	if s.CPU != nil && !cfg.without["cpu"] {
		conc = append(conc, WithConcurrencyCPU(s.CPU.Value))
		queue = append(queue, WithQueueCPU(s.CPU.Value))
	}
	s.Concurrency = NewConcurrency(append(conc, cfg.conc...)...)
	s.Queue = NewQueueDelay(append(append(queue, WithQueueBudget(s.Concurrency.Budget), WithQueueSpread(s.Concurrency.Variability), WithQueueServed(s.served)), cfg.queue...)...)
}

// served returns the requests the concurrency signal saw end, 0 when
// the set has none (dropped): the queue-delay signal's scale is then
// learned per request observed.
func (s *Set) served() int64 {
	if s.Concurrency == nil {
		return 0
	}
	return s.Concurrency.Served()
}

// drop removes the named members.
func (s *Set) drop(names map[string]bool) {
	for n := range names {
		switch n {
		case "cpu":
			s.CPU = nil
		case "sched_latency":
			s.Sched = nil
		case "queue_delay":
			s.Queue = nil
		case "concurrency":
			s.Concurrency = nil
		case "memory":
			s.Memory = nil
		case "gc_cpu":
			s.GC = nil
		case "open_files":
			s.OpenFiles = nil
		case "goroutines":
			s.Goroutines = nil
		}
	}
}

// overloadedBesides returns a function that reports whether a member of
// the set other than the one named reads above its target.
func (s *Set) overloadedBesides(name string) func() bool {
	return func() bool {
		for _, m := range s.members() {
			if v := m.Value(); m.Name() != name && !math.IsNaN(v) && v > m.Target() {
				return true
			}
		}
		return false
	}
}

// Signals returns the set's signals, in the order cpu, sched_latency,
// queue_delay, concurrency, memory, gc_cpu, goroutines, open_files; nil
// members are left out.
func (s *Set) Signals() []levee.Signal {
	ms := s.members()
	out := make([]levee.Signal, len(ms))
	for i, m := range ms {
		out[i] = m
	}
	return out
}

// Run runs every member's sampler until ctx is done and returns when all
// of them have stopped.
func (s *Set) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, m := range s.members() {
		wg.Go(func() { m.Run(ctx) })
	}
	wg.Wait()
}

// SampleAt samples, at now, every member whose period has passed since
// SampleAt last sampled it, for virtual time (Run samples with real time):
// call it at least as often as the shortest period.
func (s *Set) SampleAt(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		s.last = make(map[levee.Signal]time.Time)
	}
	for _, m := range s.members() {
		if last, ok := s.last[m]; ok && now.Sub(last) < m.Period() {
			continue
		}
		s.last[m] = now
		m.SampleAt(now)
	}
}
