package config

import (
	"sort"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// The conversions below turn a validated section into the options of the
// package it configures: one place that says what each field means to
// its package.

// Options returns the admit options the section sets: period, seed, run
// queue, quotas and dry-run at start. Signals, the degradation controller
// and the route function are wired by the caller; the Reloader's
// ApplyAdmission target keeps dry-run and quotas in step afterwards.
func (a Admit) Options() []admit.Option {
	opts := []admit.Option{
		admit.WithPeriod(a.Period),
		admit.WithSeed(a.Seed),
		admit.WithDryRun(a.DryRun),
		admit.WithRunQueue(a.RunQueue.MaxWait),
		admit.WithRunBound(a.RunQueue.Bound),
	}
	q := a.QuotaMap()
	tenants := make([]string, 0, len(q))
	for t := range q {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	for _, t := range tenants {
		opts = append(opts, admit.WithQuota(t, q[t]))
	}
	return opts
}

// QuotaMap returns the quotas as admit.Quota values keyed by the tenant id
// as levee receives it (long or non-ASCII ids hashed, as leveehttp and
// leveegrpc hash them). Invalid ids (which Validate reports) are left out.
func (a Admit) QuotaMap() map[string]admit.Quota {
	out := make(map[string]admit.Quota, len(a.Quotas))
	for t, q := range a.Quotas {
		id := wire.FormatTenant(t)
		if id == "" {
			continue
		}
		aq := admit.Quota{Rate: q.Rate, Burst: q.Burst}
		for c, l := range q.ByCriticality {
			if c.Valid() {
				aq.ByCriticality[c] = admit.Limit{Rate: l.Rate, Burst: l.Burst}
			}
		}
		out[id] = aq
	}
	return out
}

// Set builds the signals through pressure.Default, with the section's
// targets, periods, smoothing and bounds, without the signals it disables,
// and with the goroutine signal when it gives a limit. Everything else is
// Default's own: the queue-delay and concurrency signals learn from the
// CPU signal and stop learning while another signal is above its target.
// Default's configuration builds the same set as pressure.Default(). A
// queue_delay target of 0 leaves the target learned. Start it with
// go set.Run(ctx). The only errors are values out of pressure's ranges,
// which Validate refuses first.
func (s Signals) Set() (*pressure.Set, error) { return s.build() }

// build is Set, with extra options applied after the section's (tests
// inject readers with them).
func (s Signals) build(extra ...pressure.SetOption) (*pressure.Set, error) {
	opts := []pressure.SetOption{
		pressure.WithoutSignals(s.disabled()...),
		pressure.WithCPUOptions(
			pressure.WithCPUTarget(s.CPU.Target),
			pressure.WithCPUPeriod(s.CPU.Period),
			pressure.WithCPUSmoothing(s.CPU.Smoothing),
			pressure.WithRunQueueWait(s.CPU.RunQueueWait),
		),
		pressure.WithSchedOptions(
			pressure.WithSchedTarget(s.SchedLatency.Target),
			pressure.WithSchedPercentile(s.SchedLatency.Percentile),
			pressure.WithSchedPeriod(s.SchedLatency.Period),
			pressure.WithSchedSmoothing(s.SchedLatency.Smoothing),
		),
		pressure.WithQueueOptions(
			pressure.WithQueueTarget(s.QueueDelay.Target),
			pressure.WithQueueBounds(s.QueueDelay.TargetFloor, s.QueueDelay.TargetCeiling),
			pressure.WithQueueInterval(s.QueueDelay.Interval),
			pressure.WithQueueSmoothing(s.QueueDelay.Smoothing),
		),
		pressure.WithConcurrencyOptions(
			pressure.WithLatencyRatio(s.Concurrency.LatencyRatio),
			pressure.WithLatencyBounds(s.Concurrency.LatencyFloor, s.Concurrency.LatencyCeiling),
			pressure.WithMinQueue(s.Concurrency.MinQueue),
			pressure.WithConcurrencyPeriod(s.Concurrency.Period),
			pressure.WithConcurrencySmoothing(s.Concurrency.Smoothing),
		),
		pressure.WithMemoryOptions(
			pressure.WithMemoryTarget(s.Memory.Target),
			pressure.WithMemoryPeriod(s.Memory.Period),
			pressure.WithMemorySmoothing(s.Memory.Smoothing),
		),
		pressure.WithGCOptions(
			pressure.WithGCTarget(s.GCCPU.Target),
			pressure.WithGCPeriod(s.GCCPU.Period),
			pressure.WithGCSmoothing(s.GCCPU.Smoothing),
		),
		pressure.WithOpenFilesOptions(
			pressure.WithCountTarget(s.OpenFiles.Target),
			pressure.WithCountPeriod(s.OpenFiles.Period),
			pressure.WithCountSmoothing(s.OpenFiles.Smoothing),
		),
	}
	if s.Goroutines.Limit > 0 {
		opts = append(opts, pressure.WithGoroutineLimit(s.Goroutines.Limit))
	}
	set, err := pressure.Default(append(opts, extra...)...)
	if err != nil {
		return nil, err
	}
	// Default takes no options for the goroutine signal: its target is
	// set as a reload sets it.
	if set.Goroutines != nil {
		if err := set.Goroutines.SetTarget(s.Goroutines.Target); err != nil {
			return nil, err
		}
	}
	return set, nil
}

// disabled returns the names of the signals the section leaves out.
func (s Signals) disabled() []string {
	var out []string
	for _, m := range []struct {
		name string
		on   bool
	}{
		{"cpu", s.CPU.Enabled},
		{"sched_latency", s.SchedLatency.Enabled},
		{"queue_delay", s.QueueDelay.Enabled},
		{"concurrency", s.Concurrency.Enabled},
		{"memory", s.Memory.Enabled},
		{"gc_cpu", s.GCCPU.Enabled},
		{"open_files", s.OpenFiles.Enabled},
	} {
		if !m.on {
			out = append(out, m.name)
		}
	}
	return out
}

// Options returns the overload.New options of the section: the period,
// each resource's thresholds (overload.WithThresholds: they apply to the
// resources overload.Resources builds from the signals), each action's
// level and cooldown, the shed floors, the body limit, the timeouts and
// the in-flight cap's shares and minimum. The resources, the shedder and
// the logger are the caller's; Manager.Reconfigure takes the same options
// on a reload (ApplyOverload).
func (o Overload) Options() []overload.Option {
	opts := []overload.Option{overload.WithPeriod(o.Period)}
	for _, r := range o.resources() {
		opts = append(opts, overload.WithThresholds(r.name, overload.Thresholds{
			Enter: [overload.NumLevels - 1]float64{r.t.Elevated, r.t.High, r.t.Critical}, Margin: r.t.Margin, Goal: r.t.Goal,
		}))
	}
	for _, a := range o.actions() {
		opts = append(opts, overload.WithAction(a.action, a.c.Level), overload.WithCooldown(a.action, a.c.Cooldown))
	}
	return append(opts,
		overload.WithShedFloors(o.ShedFloors.Elevated, o.ShedFloors.High, o.ShedFloors.Critical),
		overload.WithBodyLimit(o.BodyLimit),
		overload.WithTimeouts(o.IdleTimeout, o.HeaderTimeout),
		overload.WithInFlightShares(o.InFlightShares.Sheddable, o.InFlightShares.SheddablePlus),
		overload.WithMinInFlight(o.MinInFlight),
	)
}

// resource and action name a field of the section with what it
// configures.
type (
	resource struct {
		name string // as overload.Resources names it
		t    *Thresholds
	}
	action struct {
		action overload.Action
		c      *OverloadAction
	}
)

// resources returns the section's thresholds by resource.
func (o *Overload) resources() []resource {
	r := &o.Resources
	return []resource{{"memory", &r.Memory}, {"gc_cpu", &r.GCCPU}, {"goroutines", &r.Goroutines}, {"open_files", &r.OpenFiles}}
}

// actions returns the section's actions.
func (o *Overload) actions() []action {
	a := &o.Actions
	return []action{
		{overload.Shed, &a.Shed}, {overload.LargeBodies, &a.LargeBodies}, {overload.InFlight, &a.InFlight},
		{overload.KeepAlive, &a.KeepAliveOff}, {overload.Timeouts, &a.ShortTimeouts},
		{overload.CriticalOnly, &a.CriticalOnly}, {overload.Collect, &a.Collect},
	}
}

// Options returns the degrade options of the section.
func (d Degrade) Options() []degrade.Option {
	return []degrade.Option{
		degrade.WithTarget(d.Target),
		degrade.WithHysteresis(d.Hysteresis),
		degrade.WithMax(degrade.Level(d.Max)),
		degrade.WithHold(d.Hold),
	}
}

// Policy returns the retry.Policy of the section. Its Budget is nil (the
// process-wide retry.DefaultBudget()); set it to the Budget section's
// retry.NewBudget(b.Options()...) to use the configured one.
func (r Retry) Policy() retry.Policy {
	j, _ := jitterOf(r.Jitter)
	return retry.Policy{
		MaxAttempts:    r.MaxAttempts,
		Base:           r.Base,
		Cap:            r.Cap,
		Multiplier:     r.Multiplier,
		Jitter:         j,
		AttemptTimeout: r.AttemptTimeout,
		Timeout:        r.Timeout,
	}
}

func jitterOf(name string) (retry.Jitter, bool) {
	for j := retry.FullJitter; j <= retry.NoJitter; j++ {
		if j.String() == name {
			return j, true
		}
	}
	return retry.FullJitter, false
}

// Options returns the retry.NewBudget options of the section.
func (b Budget) Options() []retry.BudgetOption {
	return []retry.BudgetOption{
		retry.WithRatio(b.Ratio, b.Window),
		retry.WithFloor(b.Floor, b.FloorWindow),
	}
}

// Options returns the throttle.New and throttle.NewGroup options of the
// section.
func (t Throttle) Options() []throttle.Option {
	return []throttle.Option{
		throttle.WithK(t.K),
		throttle.WithWindow(t.Window),
		throttle.WithRecovery(t.Recovery),
	}
}
