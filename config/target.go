package config

import (
	"errors"
	"maps"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/pressure"
	"github.com/levee-dev/levee/throttle"
)

// Admission is what a configuration changes on an admission controller
// while it runs; *admit.Controller implements it.
type Admission interface {
	// SetDryRun switches dry-run at run time, for the next Admit. In
	// dry-run every decision (deadline, quota, overload, the run queue's
	// wait) is computed as usual, and a request that would have been
	// rejected is admitted and counted in Snapshot.WouldReject by
	// criticality and reason instead of Snapshot.Rejected, and logged at
	// most once a second as "would reject" with those counts (never per
	// request). The control loop does not integrate a shed level that
	// never takes effect (the signals stay above target since nothing is
	// shed): it estimates the rate it would shed as the offered rate minus
	// its capacity estimate (the one learned before the overload), maps it
	// onto tenants and the criticality ladder as live shedding would,
	// lowest criticality first, and counts that plan's decisions
	// (Snapshot.WouldShedRPS is the rate). So at 3× capacity the
	// would-be rejections add up to about offered − capacity, and
	// CRITICAL_PLUS appears among them only when every lower level is
	// exhausted.
	SetDryRun(on bool)
	// SetQuotas replaces every tenant quota at once; a tenant whose quota
	// is unchanged keeps its bucket state.
	SetQuotas(q map[string]admit.Quota)
}

// ApplyAdmission returns the Target that keeps a's dry-run switch and
// tenant quotas as the configuration says (admit.dry_run, admit.quotas).
// The quotas are set only when they changed.
func ApplyAdmission(a Admission) Target {
	var last map[string]admit.Quota
	first := true
	return TargetFunc(func(c *Config) {
		a.SetDryRun(c.Admit.DryRun)
		q := c.Admit.QuotaMap()
		if first || !maps.Equal(q, last) {
			a.SetQuotas(q)
			last, first = q, false
		}
	})
}

// signalsTarget applies the signal targets to a pressure.Set.
type signalsTarget struct{ set *pressure.Set }

// ApplySignals returns the Target that keeps the targets of set's signals
// (signals.*.target) as the configuration says; the other signal fields
// need a restart. Nil members are skipped.
func ApplySignals(set *pressure.Set) Target { return signalsTarget{set} }

func (s signalsTarget) Check(next *Config) error {
	// The setters take what the options take; validation already refused
	// the rest. Try each on a throwaway signal so that Apply cannot fail.
	var errs []error
	if s.set.CPU != nil {
		c, err := pressure.NewCPU(pressure.WithCgroupFS(nil), pressure.WithProcessCPU(func() (time.Duration, error) { return 0, nil }))
		if err == nil {
			errs = append(errs, c.SetTarget(next.Signals.CPU.Target))
		}
	}
	if s.set.Sched != nil {
		errs = append(errs, pressure.NewSchedLatency().SetTarget(next.Signals.SchedLatency.Target))
	}
	if s.set.Queue != nil {
		errs = append(errs, pressure.NewQueueDelay().SetTarget(next.Signals.QueueDelay.Target))
	}
	return errors.Join(errs...)
}

func (s signalsTarget) Apply(next *Config) {
	if s.set.CPU != nil {
		_ = s.set.CPU.SetTarget(next.Signals.CPU.Target)
	}
	if s.set.Sched != nil {
		_ = s.set.Sched.SetTarget(next.Signals.SchedLatency.Target)
	}
	if s.set.Queue != nil {
		_ = s.set.Queue.SetTarget(next.Signals.QueueDelay.Target)
	}
}

// degradeTarget applies the degrade section.
type degradeTarget struct{ d *degrade.Controller }

// ApplyDegrade returns the Target that keeps d's parameters (degrade.*) as
// the configuration says.
func ApplyDegrade(d *degrade.Controller) Target { return degradeTarget{d} }

func (t degradeTarget) Check(next *Config) error {
	probe := degrade.New()
	return errors.Join(t.set(probe, next.Degrade)...)
}

func (t degradeTarget) Apply(next *Config) { _ = t.set(t.d, next.Degrade) }

func (degradeTarget) set(d *degrade.Controller, s Degrade) []error {
	return []error{
		d.SetTarget(s.Target),
		d.SetHysteresis(s.Hysteresis),
		d.SetMax(degrade.Level(s.Max)),
		d.SetHold(s.Hold),
	}
}

// ApplyThrottle returns the Target that keeps the K of g's throttles
// (client.throttle.k) as the configuration says.
func ApplyThrottle(g *throttle.Group) Target {
	return targetFuncs{
		check: func(next *Config) error { return throttle.New().SetK(next.Client.Throttle.K) },
		apply: func(next *Config) { _ = g.SetK(next.Client.Throttle.K) },
	}
}

type targetFuncs struct {
	check func(*Config) error
	apply func(*Config)
}

func (t targetFuncs) Check(next *Config) error { return t.check(next) }
func (t targetFuncs) Apply(next *Config)       { t.apply(next) }
