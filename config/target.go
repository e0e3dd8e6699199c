package config

import (
	"errors"
	"maps"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/overload"
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
// need a restart. Nil members are skipped. A queue_delay target of 0 goes
// back to the learned target.
func ApplySignals(set *pressure.Set) Target { return signalsTarget{set} }

func (s signalsTarget) Check(next *Config) error {
	// The setters take what the options take; validation already refused
	// the rest. Try them on throwaway signals (with no reader that touches
	// the system) so that Apply cannot fail.
	probe := &pressure.Set{}
	if s.set.CPU != nil {
		c, err := pressure.NewCPU(pressure.WithCgroupFS(nil), pressure.WithProcessCPU(func() (time.Duration, error) { return 0, nil }))
		if err != nil {
			return err
		}
		probe.CPU = c
	}
	none := func() (int64, int64, error) { return 0, 0, nil }
	if s.set.Sched != nil {
		probe.Sched = pressure.NewSchedLatency()
	}
	if s.set.Queue != nil {
		probe.Queue = pressure.NewQueueDelay()
	}
	if s.set.Memory != nil {
		probe.Memory = pressure.NewMemory(pressure.WithMemoryCgroupFS(nil))
	}
	if s.set.GC != nil {
		probe.GC = pressure.NewGCCPU()
	}
	if s.set.Goroutines != nil {
		probe.Goroutines = pressure.NewGoroutines(1, pressure.WithCountSource(none))
	}
	if s.set.OpenFiles != nil {
		probe.OpenFiles = pressure.NewOpenFiles(pressure.WithCountSource(none))
	}
	return setTargets(probe, next.Signals)
}

func (s signalsTarget) Apply(next *Config) { _ = setTargets(s.set, next.Signals) }

// setTargets sets the targets of set's members as sig says.
func setTargets(set *pressure.Set, sig Signals) error {
	var errs []error
	if set.CPU != nil {
		errs = append(errs, set.CPU.SetTarget(sig.CPU.Target))
	}
	if set.Sched != nil {
		errs = append(errs, set.Sched.SetTarget(sig.SchedLatency.Target))
	}
	if set.Queue != nil {
		errs = append(errs, set.Queue.SetTarget(sig.QueueDelay.Target))
	}
	if set.Memory != nil {
		errs = append(errs, set.Memory.SetTarget(sig.Memory.Target))
	}
	if set.GC != nil {
		errs = append(errs, set.GC.SetTarget(sig.GCCPU.Target))
	}
	if set.Goroutines != nil {
		errs = append(errs, set.Goroutines.SetTarget(sig.Goroutines.Target))
	}
	if set.OpenFiles != nil {
		errs = append(errs, set.OpenFiles.SetTarget(sig.OpenFiles.Target))
	}
	return errors.Join(errs...)
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

// ApplyOverload returns the Target that keeps m's tunables as the
// configuration's overload section says (Manager.Reconfigure with the
// section's Options): the actions' levels and cooldowns, the resources'
// thresholds, the shed floors, the body limit, the timeouts and the
// in-flight cap's shares and minimum. Check tries them on a throwaway
// Manager, so that Apply cannot fail.
func ApplyOverload(m *overload.Manager) Target {
	return targetFuncs{
		check: func(next *Config) error { return overload.New().Reconfigure(next.Overload.Options()...) },
		apply: func(next *Config) { _ = m.Reconfigure(next.Overload.Options()...) },
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
