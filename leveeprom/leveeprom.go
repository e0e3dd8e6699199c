package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// Option configures a collector.
type Option func(*config)

type config struct {
	constLabels prometheus.Labels
}

// WithConstLabels adds fixed labels to every metric of the collector, to tell
// apart several controllers (or throttle groups) registered on one
// Registerer, e.g. prometheus.Labels{"controller": "api"}. Default: none.
// The label names must not be ones the collector uses itself ("criticality",
// "reason", "signal", "backend"); registration fails if they are.
func WithConstLabels(l prometheus.Labels) Option {
	return func(c *config) { c.constLabels = l }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// AdmitCollector exports an admit.Controller's state. It reads
// Controller.Snapshot when it is scraped and adds nothing to the accept
// path: a Controller with an AdmitCollector admits at the same cost as one
// without. It is safe for concurrent use.
type AdmitCollector struct {
	snapshot func() admit.Snapshot

	admitted, rejected, downstream   *prometheus.Desc
	overloaded, shedLevel, admitFrac *prometheus.Desc
	degradeLevel, load, headroom     *prometheus.Desc
	signalValue, signalTarget        *prometheus.Desc
	signalLoad, capacity             *prometheus.Desc
	shedSeconds, degradedSeconds     *prometheus.Desc
	retryShare, noRetry, retryAfter  *prometheus.Desc
	fairShare, activeTenants         *prometheus.Desc
	offered, tenantShed, callerGone  *prometheus.Desc
	routes                           *prometheus.Desc
	running, waiting, runBound       *prometheus.Desc
}

// NewAdmitCollector returns a collector for ctl; register it on your own
// prometheus.Registerer (never the global one unless you choose to):
//
//	reg.MustRegister(leveeprom.NewAdmitCollector(ctl))
//
// The metrics are listed in the package documentation. A nil ctl panics.
func NewAdmitCollector(ctl *admit.Controller, opts ...Option) *AdmitCollector {
	if ctl == nil {
		panic("leveeprom: NewAdmitCollector with a nil controller")
	}
	return newAdmitCollector(ctl.Snapshot, opts)
}

// newAdmitCollector takes the snapshot source as a function so that tests
// can feed fixed snapshots.
func newAdmitCollector(snapshot func() admit.Snapshot, opts []Option) *AdmitCollector {
	cl := newConfig(opts).constLabels
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	return &AdmitCollector{
		snapshot: snapshot,
		admitted: d("levee_admissions_total",
			"Requests admitted by the admission controller.", "criticality"),
		rejected: d("levee_rejections_total",
			"Requests rejected by the admission controller, by reason (overloaded, quota, deadline).", "criticality", "reason"),
		downstream: d("levee_downstream_overloaded_total",
			"Admitted requests that finished with an overload rejection from a downstream service."),
		overloaded: d("levee_overloaded",
			"1 while the controller is overloaded (a signal above its target or shedding in progress), else 0."),
		shedLevel: d("levee_shed_level",
			"Shed level: 0 nothing shed ... 4 everything shed; the integer part counts the criticalities fully shed from SHEDDABLE up, the fraction is the share shed of the next one."),
		admitFrac: d("levee_admit_ratio",
			"Share of overload-eligible demand currently let through (1 = no shedding)."),
		degradeLevel: d("levee_degradation_level",
			"Degradation level in force (0 = normal)."),
		load: d("levee_load_ratio",
			"Maximum over signals of value / target (1 = at target); the Levee-Load header."),
		headroom: d("levee_headroom_ratio",
			"1 - levee_load_ratio: the share of the target still unused by the busiest signal (negative when above target)."),
		signalValue: d("levee_signal_value",
			"Last reading of a resource signal, in the signal's own unit (cpu: fraction of allowed cores; sched_latency and queue_delay: seconds; concurrency: in-flight / limit).", "signal"),
		signalTarget: d("levee_signal_target",
			"Target of a resource signal, in the signal's own unit; above it the controller sheds.", "signal"),
		signalLoad: d("levee_signal_load_ratio",
			"Signal value / target (1 = at target): how much of the signal's headroom is used.", "signal"),
		capacity: d("levee_capacity_requests_per_second",
			"Estimated capacity: the admitted rate at which the signals sit at their targets (goodput / utilisation)."),
		shedSeconds: d("levee_shedding_seconds_total",
			"Cumulative time spent shedding load. Should stay near zero: a capacity-planning alarm."),
		degradedSeconds: d("levee_degraded_seconds_total",
			"Cumulative time spent at a degradation level above 0. Should stay near zero outside drills."),
		retryShare: d("levee_retry_ratio",
			"Recent share of arriving requests that were retries (Levee-Attempt >= 1)."),
		noRetry: d("levee_no_retry",
			"1 while overload rejections tell callers not to retry (retry share too high), else 0."),
		retryAfter: d("levee_retry_after_seconds",
			"Retry-After advice currently given with SHEDDABLE overload rejections."),
		fairShare: d("levee_tenant_fair_share_requests_per_second",
			"Per-tenant fair share: estimated capacity / active tenants."),
		activeTenants: d("levee_active_tenants",
			"Estimated number of active tenants (bounded sketch)."),
		offered: d("levee_offered_requests_per_second",
			"Smoothed rate of requests reaching the overload stage (past the deadline and quota checks), as seen by the controller."),
		tenantShed: d("levee_tenant_shed_requests_per_second",
			"Part of the shed rate taken from tenants far above their fair share."),
		callerGone: d("levee_caller_gone_total",
			"Admitted requests that finished with a context error: the caller gave up while the work ran."),
		routes: d("levee_learned_routes",
			"Routes whose service time the controller is learning (bounded table)."),
		running: d("levee_run_queue_running",
			"Admitted requests holding a run-queue slot (counted while the server is busy)."),
		waiting: d("levee_run_queue_waiting",
			"Admitted requests waiting in the run queue for a slot."),
		runBound: d("levee_run_queue_bound",
			"Requests that may run at once (0: the run queue is off or has not learned a bound)."),
	}
}

// Describe implements prometheus.Collector.
func (c *AdmitCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.admitted, c.rejected, c.downstream, c.overloaded, c.shedLevel,
		c.admitFrac, c.degradeLevel, c.load, c.headroom, c.signalValue,
		c.signalTarget, c.signalLoad, c.capacity, c.shedSeconds,
		c.degradedSeconds, c.retryShare, c.noRetry, c.retryAfter,
		c.fairShare, c.activeTenants, c.offered, c.tenantShed, c.callerGone,
		c.routes, c.running, c.waiting, c.runBound,
	} {
		ch <- d
	}
}

// admitReasons are the reasons the admission controller rejects with;
// Throttled is a client-side reason and never appears here.
var admitReasons = [...]levee.Reason{levee.Overloaded, levee.Quota, levee.Deadline}

// Collect implements prometheus.Collector. It takes one Snapshot.
func (c *AdmitCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.snapshot()
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for _, crit := range levee.Criticalities() {
		name := crit.String()
		counter(c.admitted, float64(s.Admitted[crit]), name)
		for _, r := range admitReasons {
			counter(c.rejected, float64(s.Rejected[crit][r]), name, r.String())
		}
	}
	counter(c.downstream, float64(s.DownstreamOverloaded))
	gauge(c.overloaded, b2f(s.Overloaded))
	gauge(c.shedLevel, s.ShedLevel)
	gauge(c.admitFrac, s.AdmitFraction)
	gauge(c.degradeLevel, float64(s.DegradeLevel))
	gauge(c.load, s.Load)
	gauge(c.headroom, 1-s.Load)
	for _, sig := range s.Signals {
		gauge(c.signalValue, sig.Value, sig.Name)
		gauge(c.signalTarget, sig.Target, sig.Name)
		gauge(c.signalLoad, sig.Load(), sig.Name)
	}
	gauge(c.capacity, s.CapacityRPS)
	counter(c.shedSeconds, s.ShedSeconds)
	counter(c.degradedSeconds, s.DegradedSeconds)
	gauge(c.retryShare, s.RetryShare)
	gauge(c.noRetry, b2f(s.NoRetry))
	gauge(c.retryAfter, s.RetryAfter.Seconds())
	gauge(c.fairShare, s.FairShareRPS)
	gauge(c.activeTenants, float64(s.ActiveTenants))
	gauge(c.offered, s.OfferedRPS)
	gauge(c.tenantShed, s.TenantShedRPS)
	counter(c.callerGone, float64(s.CallerGone))
	gauge(c.routes, float64(s.Routes))
	gauge(c.running, float64(s.Running))
	gauge(c.waiting, float64(s.Waiting))
	gauge(c.runBound, float64(s.RunBound))
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
