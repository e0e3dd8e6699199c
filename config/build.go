package config

import (
	"sort"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/pressure"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// The conversions below turn a validated section into the options of the
// package it configures: one place that says what each field means to
// its package.

// Options returns the admit options the section sets: period, seed, run
// queue and quotas. Signals, the degradation controller, the route
// function and dry-run are wired by the caller (dry-run with SetDryRun,
// which the Reloader's ApplyAdmission target keeps in step).
func (a Admit) Options() []admit.Option {
	opts := []admit.Option{
		admit.WithPeriod(a.Period),
		admit.WithSeed(a.Seed),
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

// Set builds the signals the section enables, with its targets, periods
// and smoothing; Default's is the same as pressure.Default. Start it with
// go set.Run(ctx). It returns pressure.NewCPU's error when the CPU signal
// cannot be read.
func (s Signals) Set() (*pressure.Set, error) {
	set := &pressure.Set{}
	if s.CPU.Enabled {
		cpu, err := pressure.NewCPU(
			pressure.WithCPUTarget(s.CPU.Target),
			pressure.WithCPUPeriod(s.CPU.Period),
			pressure.WithCPUSmoothing(s.CPU.Smoothing),
			pressure.WithRunQueueWait(s.CPU.RunQueueWait),
		)
		if err != nil {
			return nil, err
		}
		set.CPU = cpu
	}
	if s.SchedLatency.Enabled {
		set.Sched = pressure.NewSchedLatency(
			pressure.WithSchedTarget(s.SchedLatency.Target),
			pressure.WithSchedPercentile(s.SchedLatency.Percentile),
			pressure.WithSchedPeriod(s.SchedLatency.Period),
			pressure.WithSchedSmoothing(s.SchedLatency.Smoothing),
		)
	}
	if s.QueueDelay.Enabled {
		set.Queue = pressure.NewQueueDelay(
			pressure.WithQueueTarget(s.QueueDelay.Target),
			pressure.WithQueueInterval(s.QueueDelay.Interval),
			pressure.WithQueueSmoothing(s.QueueDelay.Smoothing),
		)
	}
	return set, nil
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
