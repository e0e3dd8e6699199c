package instrument

import (
	"slices"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// Kind says how a metric's value behaves.
type Kind uint8

const (
	// Counter is cumulative and never falls (it restarts at zero with the
	// process).
	Counter Kind = iota + 1
	// Gauge is a value read now.
	Gauge
)

// Metric describes one exported metric. The values in this package are
// shared: never modify one.
type Metric struct {
	// Name is the Prometheus metric name and the OpenTelemetry instrument
	// name.
	Name string
	// Unit is the UCUM unit ("" when the value has no single unit).
	Unit string
	// Help is the one-line description.
	Help string
	// Kind is Counter or Gauge.
	Kind Kind
	// Labels are the label (attribute) names, in the order in which a
	// reading gives their values.
	Labels []string
}

// Emit receives one reading: the metric, its value and its label values in
// the order of Metric.Labels.
type Emit func(m *Metric, v float64, labelValues ...string)

// Label names.
const (
	LabelCriticality = "criticality"
	LabelReason      = "reason"
	LabelSignal      = "signal"
	LabelBackend     = "backend"
	LabelKind        = "kind"
	LabelResult      = "result"
	LabelStage       = "stage"
)

// Units.
const (
	unitRequests = "{request}"
	// unitRate is an annotation rather than "{request}/s": OpenTelemetry's
	// Prometheus translation appends "_per_second" for a "/s" unit even
	// when the name already ends with it.
	unitRate    = "{request/s}"
	unitSeconds = "s"
	unitRatio   = "1"
	unitLevel   = "{level}"
)

// The admission controller's metrics (AdmitMetrics lists them).
var (
	Admissions = &Metric{Name: "levee_admissions_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelCriticality},
		Help:   "Requests admitted by the admission controller."}
	Rejections = &Metric{Name: "levee_rejections_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelCriticality, LabelReason},
		Help:   "Requests rejected by the admission controller, by reason (overloaded, quota, deadline)."}
	OverloadRejections = &Metric{Name: "levee_overload_rejections_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelCriticality, LabelStage},
		Help:   "Overload rejections by the stage that decided them: tenant (a tenant far above its fair share), ladder (the criticalities, lowest first), forced (a forced shed level), run_queue (waited too long), external (an overload gate outside the controller); they add up to levee_rejections_total{reason=\"overloaded\"}."}
	DownstreamOverloaded = &Metric{Name: "levee_downstream_overloaded_total", Unit: unitRequests, Kind: Counter,
		Help: "Admitted requests that finished with an overload rejection from a downstream service."}
	Overloaded = &Metric{Name: "levee_overloaded", Kind: Gauge,
		Help: "1 while the controller is overloaded (a signal above its target or shedding in progress), else 0."}
	ShedLevel = &Metric{Name: "levee_shed_level", Unit: unitLevel, Kind: Gauge,
		Help: "Shed level: 0 nothing shed ... 4 everything shed; the integer part counts the criticalities fully shed from SHEDDABLE up, the fraction is the share shed of the next one."}
	AdmitRatio = &Metric{Name: "levee_admit_ratio", Unit: unitRatio, Kind: Gauge,
		Help: "Share of overload-eligible demand currently let through (1 = no shedding)."}
	DegradationLevel = &Metric{Name: "levee_degradation_level", Unit: unitLevel, Kind: Gauge,
		Help: "Degradation level in force (0 = normal)."}
	LoadRatio = &Metric{Name: "levee_load_ratio", Unit: unitRatio, Kind: Gauge,
		Help: "Maximum over signals of value / target (1 = at target); the Levee-Load header."}
	HeadroomRatio = &Metric{Name: "levee_headroom_ratio", Unit: unitRatio, Kind: Gauge,
		Help: "1 - levee_load_ratio: the share of the target still unused by the busiest signal (negative when above target)."}
	SignalValue = &Metric{Name: "levee_signal_value", Kind: Gauge,
		Labels: []string{LabelSignal},
		Help:   "Last reading of a resource signal, in the signal's own unit (cpu: fraction of allowed cores; sched_latency and queue_delay: seconds; concurrency: in-flight / limit)."}
	SignalTarget = &Metric{Name: "levee_signal_target", Kind: Gauge,
		Labels: []string{LabelSignal},
		Help:   "Target of a resource signal, in the signal's own unit; above it the controller sheds."}
	SignalLoadRatio = &Metric{Name: "levee_signal_load_ratio", Unit: unitRatio, Kind: Gauge,
		Labels: []string{LabelSignal},
		Help:   "Signal value / target (1 = at target): how much of the signal's headroom is used."}
	Capacity = &Metric{Name: "levee_capacity_requests_per_second", Unit: unitRate, Kind: Gauge,
		Help: "Estimated capacity: the admitted rate at which the signals sit at their targets (goodput / utilisation)."}
	SheddingSeconds = &Metric{Name: "levee_shedding_seconds_total", Unit: unitSeconds, Kind: Counter,
		Help: "Cumulative time spent shedding load. Should stay near zero: a capacity-planning alarm."}
	DegradedSeconds = &Metric{Name: "levee_degraded_seconds_total", Unit: unitSeconds, Kind: Counter,
		Help: "Cumulative time spent at a degradation level above 0. Should stay near zero outside drills."}
	RetryRatio = &Metric{Name: "levee_retry_ratio", Unit: unitRatio, Kind: Gauge,
		Help: "Recent share of arriving requests that were retries (Levee-Attempt >= 1)."}
	NoRetry = &Metric{Name: "levee_no_retry", Kind: Gauge,
		Help: "1 while overload rejections tell callers not to retry (retry share too high), else 0."}
	RetryAfter = &Metric{Name: "levee_retry_after_seconds", Unit: unitSeconds, Kind: Gauge,
		Help: "Retry-After advice currently given with SHEDDABLE overload rejections."}
	FairShare = &Metric{Name: "levee_tenant_fair_share_requests_per_second", Unit: unitRate, Kind: Gauge,
		Help: "Per-tenant fair share: estimated capacity / active tenants."}
	ActiveTenants = &Metric{Name: "levee_active_tenants", Unit: "{tenant}", Kind: Gauge,
		Help: "Estimated number of active tenants (bounded sketch)."}
	Offered = &Metric{Name: "levee_offered_requests_per_second", Unit: unitRate, Kind: Gauge,
		Help: "Smoothed rate of requests reaching the overload stage (past the deadline and quota checks), as seen by the controller."}
	TenantShed = &Metric{Name: "levee_tenant_shed_requests_per_second", Unit: unitRate, Kind: Gauge,
		Help: "Part of the shed rate taken from tenants far above their fair share."}
	CallerGone = &Metric{Name: "levee_caller_gone_total", Unit: unitRequests, Kind: Counter,
		Help: "Admitted requests that finished with a context error: the caller gave up while the work ran."}
	LearnedRoutes = &Metric{Name: "levee_learned_routes", Unit: "{route}", Kind: Gauge,
		Help: "Routes whose service time the controller is learning (bounded table)."}
	RunQueueRunning = &Metric{Name: "levee_run_queue_running", Unit: unitRequests, Kind: Gauge,
		Help: "Admitted requests holding a run-queue slot (counted while the server is busy)."}
	RunQueueWaiting = &Metric{Name: "levee_run_queue_waiting", Unit: unitRequests, Kind: Gauge,
		Help: "Admitted requests waiting in the run queue for a slot."}
	RunQueueBound = &Metric{Name: "levee_run_queue_bound", Unit: unitRequests, Kind: Gauge,
		Help: "Requests that may run at once (0: the run queue is off or has not learned a bound)."}
	DryRun = &Metric{Name: "levee_dry_run", Kind: Gauge,
		Help: "1 while the controller is in dry-run (decisions computed and counted, nothing rejected), else 0."}
	WouldReject = &Metric{Name: "levee_would_reject_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelCriticality, LabelReason},
		Help:   "Requests admitted in dry-run that would have been rejected, by reason (overloaded, quota, deadline); levee_rejections_total does not count them."}
	WouldShed = &Metric{Name: "levee_would_shed_requests_per_second", Unit: unitRate, Kind: Gauge,
		Help: "In dry-run, the rate the controller estimates it would shed for overload (offered minus its capacity estimate); 0 otherwise."}
	ForcedShed = &Metric{Name: "levee_forced_shed_level", Unit: unitLevel, Kind: Gauge,
		Help: "Shed level forced by a drill (0: none)."}
)

// AdmitMetrics lists the metrics ReadAdmit gives.
var AdmitMetrics = []*Metric{
	Admissions, Rejections, OverloadRejections, DownstreamOverloaded, Overloaded, ShedLevel,
	AdmitRatio, DegradationLevel, LoadRatio, HeadroomRatio, SignalValue,
	SignalTarget, SignalLoadRatio, Capacity, SheddingSeconds,
	DegradedSeconds, RetryRatio, NoRetry, RetryAfter, FairShare,
	ActiveTenants, Offered, TenantShed, CallerGone, LearnedRoutes,
	RunQueueRunning, RunQueueWaiting, RunQueueBound, DryRun, WouldReject,
	WouldShed, ForcedShed,
}

// All lists every metric levee exports: AdmitMetrics, StateChanges,
// HealthProbes, ConnsGone, ConfigMetrics, AdminMetrics, ThrottleMetrics,
// BudgetMetrics and OverloadMetrics.
func All() []*Metric {
	return slices.Concat(AdmitMetrics, []*Metric{StateChanges, HealthProbes, ConnsGone}, ConfigMetrics, AdminMetrics, ThrottleMetrics, BudgetMetrics, OverloadMetrics)
}

// admitReasons are the reasons the admission controller rejects with;
// Throttled is a client-side reason and never appears here.
var admitReasons = [...]levee.Reason{levee.Overloaded, levee.Quota, levee.Deadline}

// ReadAdmit gives every reading of s to emit: the counters for every
// criticality (and reason) even at zero, the signal metrics once per
// signal, every other metric of AdmitMetrics once.
func ReadAdmit(s admit.Snapshot, emit Emit) {
	for _, crit := range levee.Criticalities() {
		name := crit.String()
		emit(Admissions, float64(s.Admitted[crit]), name)
		for _, r := range admitReasons {
			emit(Rejections, float64(s.Rejected[crit][r]), name, r.String())
			emit(WouldReject, float64(s.WouldReject[crit][r]), name, r.String())
		}
		for st := admit.Stage(1); int(st) < admit.NumStages; st++ {
			emit(OverloadRejections, float64(s.Shed[crit][st]), name, st.String())
		}
	}
	emit(DownstreamOverloaded, float64(s.DownstreamOverloaded))
	emit(Overloaded, b2f(s.Overloaded))
	emit(ShedLevel, s.ShedLevel)
	emit(AdmitRatio, s.AdmitFraction)
	emit(DegradationLevel, float64(s.DegradeLevel))
	emit(LoadRatio, s.Load)
	emit(HeadroomRatio, 1-s.Load)
	for _, sig := range s.Signals {
		emit(SignalValue, sig.Value, sig.Name)
		emit(SignalTarget, sig.Target, sig.Name)
		emit(SignalLoadRatio, sig.Load(), sig.Name)
	}
	emit(Capacity, s.CapacityRPS)
	emit(SheddingSeconds, s.ShedSeconds)
	emit(DegradedSeconds, s.DegradedSeconds)
	emit(RetryRatio, s.RetryShare)
	emit(NoRetry, b2f(s.NoRetry))
	emit(RetryAfter, s.RetryAfter.Seconds())
	emit(FairShare, s.FairShareRPS)
	emit(ActiveTenants, float64(s.ActiveTenants))
	emit(Offered, s.OfferedRPS)
	emit(TenantShed, s.TenantShedRPS)
	emit(CallerGone, float64(s.CallerGone))
	emit(LearnedRoutes, float64(s.Routes))
	emit(RunQueueRunning, float64(s.Running))
	emit(RunQueueWaiting, float64(s.Waiting))
	emit(RunQueueBound, float64(s.RunBound))
	emit(DryRun, b2f(s.DryRun))
	emit(WouldShed, s.WouldShedRPS)
	emit(ForcedShed, s.ForcedShed)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
