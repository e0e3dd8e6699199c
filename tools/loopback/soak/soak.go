package soak

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
	"github.com/levee-dev/levee/tools/report"
)

// Config describes a soak. The zero value of each field means its
// default.
type Config struct {
	// Duration of the overload. Default 1 minute.
	Duration time.Duration
	// Load is the offered rate in multiples of the capacity. Default 3.
	Load float64
	// Rate, if above 0, is the offered rate itself (requests per second),
	// and the capacity is not measured.
	Rate float64
	// Work is the CPU time per request. Default 1 ms.
	Work time.Duration
	// Warmup is the start of the overload that is not judged for
	// flatness. Default a minute, at most a third of Duration.
	Warmup time.Duration
	// Window is the stretch whose median is compared with the whole's.
	// Default 10 s, at most a sixth of what is judged.
	Window time.Duration
	// Sample is how often the backend is sampled. Default 1 s.
	Sample time.Duration
	// After is the light phase (0.5× the capacity, or of Rate ÷ Load)
	// after the overload, in which the server must serve again. Default
	// 10 s.
	After time.Duration
	// HostileEvery sends a hostile header set on one request in
	// HostileEvery. Default 20; negative: none.
	HostileEvery int
	// RawRate is the rate of fast raw hostile exchanges a second; Slow
	// the slow senders always open. Defaults 20 and 32; negative: none.
	RawRate float64
	Slow    int
	// Progress, if set, receives the generator's progress once a second.
	Progress func(load.Progress)
}

// goroutineCeiling is the ceiling of the backend's goroutines signal:
// far above any count, so the signal never trips, and a power of two, so
// the count comes back exact from value × ceiling.
const goroutineCeiling = 1 << 20

// Phase names.
const (
	PhaseOverload = "overload"
	PhaseAfter    = "after"
)

func (c Config) withDefaults() Config {
	if c.Duration <= 0 {
		c.Duration = time.Minute
	}
	if c.Load <= 0 {
		c.Load = 3
	}
	if c.Work <= 0 {
		c.Work = time.Millisecond
	}
	if c.Warmup <= 0 {
		c.Warmup = min(time.Minute, c.Duration/3)
	}
	if c.Window <= 0 {
		c.Window = min(10*time.Second, (c.Duration-c.Warmup)/6)
	}
	c.Window = max(c.Window, time.Second)
	if c.Sample <= 0 {
		c.Sample = time.Second
	}
	if c.After <= 0 {
		c.After = 10 * time.Second
	}
	if c.HostileEvery == 0 {
		c.HostileEvery = 20
	}
	if c.RawRate == 0 {
		c.RawRate = 20
	}
	if c.Slow == 0 {
		c.Slow = 32
	}
	return c
}

// Result is what a soak measured.
type Result struct {
	Config Config `json:"-"`
	// Capacity is the unprotected closed-loop capacity (0 when Rate was
	// given); OfferedRPS the overload's rate.
	Capacity   float64 `json:"capacity_rps"`
	OfferedRPS float64 `json:"offered_rps"`
	// AttemptRPS is the attempts per second the generator put on the wire
	// over the overload (retries included), RawRPS the raw hostile
	// exchanges per second it opened.
	AttemptRPS float64 `json:"attempt_rps"`
	RawRPS     float64 `json:"raw_rps"`
	// Run is the naive clients' run in levee's report schema.
	Run report.Run `json:"run"`
	// Headers counts the answers to the hostile header sets; Raw the
	// outcomes of the raw exchanges.
	Headers map[string]map[string]int64 `json:"headers"`
	Raw     map[string]map[string]int64 `json:"raw"`
	// Samples of the backend, and the flatness of its memory, goroutines
	// and descriptors over the overload after the warm-up.
	Samples    Samples  `json:"samples"`
	RSS        Flatness `json:"rss"`
	Goroutines Flatness `json:"goroutines"`
	FDs        Flatness `json:"fds"`
	// Recovery is the seconds after the overload until the server answered
	// ≥ 95% of the light load in time for 2 s, -1 if it did not.
	Recovery float64 `json:"recovery_s"`
	// Alive says the backend was still running at the end; Panics counts
	// its handler panics, ServerErrors what net/http logged, Stderr what
	// it wrote on stderr.
	Alive        bool             `json:"alive"`
	Panics       int64            `json:"panics"`
	ServerErrors map[string]int64 `json:"server_errors,omitempty"`
	Stderr       string           `json:"stderr,omitempty"`
}

// Problems lists what in r says the backend misbehaved: it died, panicked,
// raced, or its stderr holds a panic. Empty when nothing did.
func (r *Result) Problems() []string {
	var out []string
	if !r.Alive {
		out = append(out, "the backend died")
	}
	if r.Panics > 0 {
		out = append(out, fmt.Sprintf("%d handler panics", r.Panics))
	}
	for _, s := range []string{"panic", "DATA RACE", "fatal error"} {
		if strings.Contains(r.Stderr, s) {
			out = append(out, fmt.Sprintf("the backend's stderr holds %q:\n%.2000s", s, r.Stderr))
			break
		}
	}
	return out
}

// Run soaks levee: a backend child (levee, trusting 127.0.0.1 only, with
// its status page and goroutines signal) on the first CPU, and from this
// process, pinned to the second CPU for the run, naive clients (trusted
// rotating tenant ids and untrusted rotating source addresses, one request
// in HostileEvery with hostile headers), raw hostile exchanges and slow
// senders, while the backend's memory, goroutines and descriptors are
// sampled.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg = cfg.withDefaults()
	res := &Result{Config: cfg, Recovery: -1}
	rate, light := cfg.Rate, cfg.Rate/cfg.Load*0.5
	if rate <= 0 {
		c, _, err := loopback.Capacity(ctx, cfg.Work, 8, 3*time.Second)
		if err != nil {
			return nil, err
		}
		res.Capacity = c
		rate, light = cfg.Load*c, 0.5*c
	}
	res.OfferedRPS = report.Round(rate)
	limit := cfg.Duration + cfg.After + 2*time.Minute
	b, err := loopback.StartBackendWith(ctx, loopback.BackendConfig{
		Protection: backend.Levee, Work: cfg.Work, Limit: limit,
		Levee: backend.LeveeOptions{Trust: []string{"127.0.0.1/32"}, Status: true, GoroutineCeiling: goroutineCeiling},
	})
	if err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_, _ = b.Stop()
		}
	}()
	restore, err := pinAway()
	if err != nil {
		return nil, err
	}
	defer restore()

	url := "http://" + b.Addr
	clients, err := newClients(url+"/work", &Rotation{Window: 2000, Slide: 50, start: time.Now()}, NewSources(1), cfg.HostileEvery)
	if err != nil {
		return nil, err
	}
	defer clients.close()
	smp := &sampler{pid: b.PID, statusURL: url + backend.StatusPath + "?format=json&history=0", ceiling: goroutineCeiling,
		client: &http.Client{Transport: load.NewTransport()}, period: cfg.Sample}
	// The goroutines at rest, before any load (t = 0): the baseline the
	// overload's samples are read against. The backend, idle, answers it
	// even on a machine busy with other work, where its status page may
	// miss every poll during the overload (a race-built backend sharing
	// its CPU with other processes took more than 3 s twice in a run).
	rest, restErr := smp.atRest(ctx, 10*time.Second)
	start := time.Now()
	smp.start = start
	sctx, stopSampling := context.WithCancel(ctx)
	samples := make(chan Samples, 1)
	go func() { samples <- smp.run(sctx) }()

	rctx, stopRaw := context.WithTimeout(ctx, cfg.Duration)
	defer stopRaw()
	raw := &rawDriver{addr: b.Addr, src: NewSources(17), rate: cfg.RawRate, slow: cfg.Slow, maxFast: 64}
	rawDone := make(chan map[string]map[string]int64, 1)
	go func() { rawDone <- raw.run(rctx) }()

	// The untrusted clients' idle connections are closed every second,
	// so that their requests keep coming from new addresses.
	cctx, stopClosing := context.WithCancel(ctx)
	go every(cctx, time.Second, func(time.Time) bool { clients.CloseIdle(); return true })

	four := []load.Share{{Name: "CRITICAL_PLUS", Weight: 1}, {Name: "CRITICAL", Weight: 1}, {Name: "SHEDDABLE_PLUS", Weight: 1}, {Name: "SHEDDABLE", Weight: 1}}
	lr, err := load.Run(ctx, load.Config{
		Phases: []load.Phase{
			{Name: PhaseOverload, Rate: rate, Duration: cfg.Duration},
			{Name: PhaseAfter, Rate: light, Duration: cfg.After},
		},
		Do:       clients.Do,
		Mix:      load.Mix{Criticalities: four},
		Limits:   load.Limits{MaxRate: load.CeilingRate, MaxDuration: load.CeilingDuration},
		Drain:    3 * time.Second,
		Progress: cfg.Progress,
	})
	stopClosing()
	stopRaw()
	res.Raw = <-rawDone
	stopSampling()
	res.Samples = <-samples
	if restErr == nil {
		res.Samples.Goroutines = append([]Sample{{0, float64(rest)}}, res.Samples.Goroutines...)
	} else if ctx.Err() == nil {
		res.Samples.StatusMisses++
	}
	if err != nil {
		return nil, err
	}
	res.Alive = b.Alive()
	stopped = true
	srv, serr := b.Stop()
	res.Stderr = b.Stderr()
	if serr != nil {
		res.Alive = false
	}
	res.Panics, res.ServerErrors = srv.Panics, srv.ServerErrors

	run := lr.Run()
	run.Name, run.Protection, run.Client = "soak", backend.Levee, load.ClientNaive
	run.CapacityRPS = report.Round(res.Capacity)
	if serr == nil {
		in, is := srv.Instance("backend", lr.Start)
		run.Instances, run.Series.Instances = []report.Instance{in}, []report.InstanceSeries{is}
		if s, ok := run.ServerRecoveryAfter(PhaseOverload, 2); ok {
			res.Recovery = s
		}
	}
	res.Run = run
	if p, ok := run.Phase(PhaseOverload); ok {
		res.AttemptRPS = p.AttemptedRPS
	}
	var raws int64
	for _, m := range res.Raw {
		for k, n := range m {
			if !strings.HasPrefix(k, "skipped") {
				raws += n
			}
		}
	}
	res.RawRPS = report.Round(float64(raws) / cfg.Duration.Seconds())
	res.Headers = clients.Answers()
	res.judge(lr.Start.Sub(start).Seconds())
	return res, nil
}

// judge computes the flatness of the samples taken during the overload
// after the warm-up; shift is the generator's start after the sampler's.
func (r *Result) judge(shift float64) {
	c := r.Config
	during := func(xs []Sample) []Sample {
		var out []Sample
		for _, s := range xs {
			if t := s.T - shift; t >= 0 && t <= c.Duration.Seconds() {
				out = append(out, Sample{t, s.Value})
			}
		}
		return out
	}
	w, win := c.Warmup.Seconds(), c.Window.Seconds()
	r.RSS = Flat("rss", during(r.Samples.RSS), w, win)
	r.Goroutines = Flat("goroutines", during(r.Samples.Goroutines), w, win)
	r.FDs = Flat("fds", during(r.Samples.FDs), w, win)
}

// Text renders r for a log: the load reached, the backend's flatness, its
// misbehaviour, and the answers to every hostile request.
func (r *Result) Text() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "soak: %v of overload at %.0f req/s offered", c.Duration, r.OfferedRPS)
	if r.Capacity > 0 {
		fmt.Fprintf(&b, " (%.1f× the closed-loop capacity %.0f req/s)", r.OfferedRPS/r.Capacity, r.Capacity)
	}
	fmt.Fprintf(&b, ", then %v at %.0f req/s; %v per request\n", c.After, r.OfferedRPS/c.Load*0.5, c.Work)
	if p, ok := r.Run.Phase(PhaseOverload); ok {
		fmt.Fprintf(&b, "generator reached %.0f attempts/s (%.2f per offered request; goodput %.0f/s, rejected %.0f/s, failed %.0f/s), %.1f raw hostile exchanges/s, %d slow senders open; max lag %.2fs, generator errors %d\n",
			r.AttemptRPS, p.AttemptedRPS/max(p.OfferedRPS, 1), p.GoodputRPS, p.RejectedRPS, p.FailedRPS, r.RawRPS, c.Slow, r.Run.MaxLagS, r.Run.GeneratorErrors)
	}
	fmt.Fprintf(&b, "recovery after the overload: %s\n", seconds(r.Recovery))
	fmt.Fprintf(&b, "backend over the overload after %v (windows of %v; %d polls of the status page failed):\n", c.Warmup, c.Window, r.Samples.StatusMisses)
	for _, f := range []Flatness{r.RSS, r.Goroutines, r.FDs} {
		fmt.Fprintf(&b, "  %-10s median %.0f, min %.0f, max %.0f; window medians %.0f … %.0f: deviation %.1f%%, trend %+.2f%%/min (%d samples)\n",
			f.Name, f.Median, f.Min, f.Max, f.LowestW, f.HighestW, 100*f.Deviation, 100*f.GrowthPerMin, f.Samples)
	}
	fmt.Fprintf(&b, "backend alive %v, handler panics %d, net/http complaints %v\n", r.Alive, r.Panics, r.ServerErrors)
	b.WriteString("hostile header sets (answers):\n")
	for _, k := range slices.Sorted(maps.Keys(r.Headers)) {
		fmt.Fprintf(&b, "  %-28s %v\n", k, r.Headers[k])
	}
	b.WriteString("raw exchanges (outcomes):\n")
	for _, k := range slices.Sorted(maps.Keys(r.Raw)) {
		fmt.Fprintf(&b, "  %-32s %v\n", k, r.Raw[k])
	}
	return b.String()
}

func seconds(s float64) string {
	if s < 0 {
		return "not within the light phase"
	}
	return fmt.Sprintf("%.1f s", s)
}
