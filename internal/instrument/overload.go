package instrument

import (
	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/overload"
)

// The overload manager's metrics (OverloadMetrics lists them). A
// resource is labelled as a signal (its name: memory, gc_cpu, goroutines,
// open_files), an action and a refusal by kind.
var (
	OverloadLevel = &Metric{Name: "levee_overload_level", Unit: unitLevel, Kind: Gauge,
		Help: "Overload manager level: 0 normal, 1 elevated, 2 high, 3 critical (only CRITICAL_PLUS and health probes served)."}
	OverloadResourceRatio = &Metric{Name: "levee_overload_resource_ratio", Unit: unitRatio, Kind: Gauge,
		Labels: []string{LabelSignal},
		Help:   "A resource's reading against its thresholds: the fraction of its limit in use (the GC's share of the CPU for gc_cpu); NaN without a reading."}
	OverloadResourceUsed = &Metric{Name: "levee_overload_resource_used", Kind: Gauge,
		Labels: []string{LabelSignal},
		Help:   "What a resource has in use, in its own unit (memory: bytes; goroutines; open_files: descriptors); 0 when unknown."}
	OverloadResourceLimit = &Metric{Name: "levee_overload_resource_limit", Kind: Gauge,
		Labels: []string{LabelSignal},
		Help:   "A resource's limit, in its own unit (memory: GOMEMLIMIT or the cgroup's, bytes; goroutines: the ceiling; open_files: RLIMIT_NOFILE); 0 when unknown."}
	OverloadResourceLevel = &Metric{Name: "levee_overload_resource_level", Unit: unitLevel, Kind: Gauge,
		Labels: []string{LabelSignal},
		Help:   "The level a resource puts the process at (0 normal ... 3 critical)."}
	OverloadActionActive = &Metric{Name: "levee_overload_action_active", Kind: Gauge,
		Labels: []string{LabelKind},
		Help:   "1 while an overload action is active (shed, large_bodies, in_flight, keep_alive_off, short_timeouts, critical_only, collect), else 0."}
	OverloadActionSeconds = &Metric{Name: "levee_overload_action_active_seconds_total", Unit: unitSeconds, Kind: Counter,
		Labels: []string{LabelKind},
		Help:   "Cumulative time an overload action has been active."}
	OverloadRefusals = &Metric{Name: "levee_overload_refusals_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelCriticality, LabelKind},
		Help:   "Requests refused by the overload manager's gate, by kind: critical_only, large_body, in_flight."}
	OverloadInFlight = &Metric{Name: "levee_overload_in_flight", Unit: unitRequests, Kind: Gauge,
		Help: "Requests in flight through the overload manager's gate."}
	OverloadInFlightCap = &Metric{Name: "levee_overload_in_flight_cap", Unit: unitRequests, Kind: Gauge,
		Help: "The cap on CRITICAL requests in flight the resources held by requests allow (0: none)."}
	OverloadCollections = &Metric{Name: "levee_overload_collections_total", Unit: "{collection}", Kind: Counter,
		Help: "Garbage collections forced because the live-heap reading was stale while it mattered."}
)

// OverloadMetrics lists the metrics ReadOverload gives.
var OverloadMetrics = []*Metric{
	OverloadLevel, OverloadResourceRatio, OverloadResourceUsed, OverloadResourceLimit,
	OverloadResourceLevel, OverloadActionActive, OverloadActionSeconds, OverloadRefusals,
	OverloadInFlight, OverloadInFlightCap, OverloadCollections,
}

// ReadOverload gives every reading of s to emit: the resource metrics
// once per resource, the action metrics for every action, the refusals
// for every kind and criticality even at zero.
func ReadOverload(s overload.Status, emit Emit) {
	emit(OverloadLevel, float64(s.Level))
	for _, r := range s.Resources {
		emit(OverloadResourceRatio, r.Value, r.Name)
		emit(OverloadResourceUsed, r.Used, r.Name)
		emit(OverloadResourceLimit, r.Limit, r.Name)
		emit(OverloadResourceLevel, float64(r.Level), r.Name)
	}
	for _, a := range s.Actions {
		name := a.Action.String()
		emit(OverloadActionActive, b2f(a.Active), name)
		emit(OverloadActionSeconds, a.ActiveSeconds, name)
	}
	for _, v := range overload.Refusals() {
		for _, c := range levee.Criticalities() {
			emit(OverloadRefusals, float64(s.Refused[v][c]), c.String(), v.String())
		}
	}
	emit(OverloadInFlight, float64(s.InFlight))
	emit(OverloadInFlightCap, float64(s.Cap))
	emit(OverloadCollections, float64(s.Collections))
}
