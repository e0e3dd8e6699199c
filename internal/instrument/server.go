package instrument

import "time"

// HealthProbes counts the health and readiness requests a server passed
// through without admission.
var HealthProbes = &Metric{Name: "levee_health_probes_total", Unit: unitRequests, Kind: Counter,
	Help: "Health and readiness requests passed through without admission (never shed)."}

// ReadProbes gives the probe count n to emit.
func ReadProbes(n uint64, emit Emit) { emit(HealthProbes, float64(n)) }

// ConnsGone counts the connections a server closed unread at their
// accept because their peer had closed them while they waited in the
// kernel's accept queue (leveehttp.Listener).
var ConnsGone = &Metric{Name: "levee_connections_gone_total", Unit: "{connection}", Kind: Counter,
	Help: "Connections closed unread at accept: their peer had closed them while they waited in the accept queue."}

// ReadConnsGone gives the count n of connections closed unread to emit.
func ReadConnsGone(n uint64, emit Emit) { emit(ConnsGone, float64(n)) }

// The configuration's and the admin endpoint's metrics (ConfigMetrics and
// AdminMetrics list them).
var (
	ConfigReloads = &Metric{Name: "levee_config_reloads_total", Unit: "{reload}", Kind: Counter,
		Labels: []string{LabelResult},
		Help:   "Configuration reloads by result: applied (a change put in force), rejected (the configuration in force kept), unchanged."}
	ConfigChanges = &Metric{Name: "levee_config_changes_total", Unit: "{field}", Kind: Counter,
		Help: "Configuration fields changed by applied reloads."}
	ConfigGeneration = &Metric{Name: "levee_config_generation", Unit: "{generation}", Kind: Gauge,
		Help: "Generation of the configuration in force (1 at start, +1 per applied change)."}
	ConfigLastOK = &Metric{Name: "levee_config_last_reload_success", Kind: Gauge,
		Help: "1 if the last reload was applied or found nothing to change, 0 if it was rejected."}
	ConfigAppliedAt = &Metric{Name: "levee_config_applied_timestamp_seconds", Unit: unitSeconds, Kind: Gauge,
		Help: "Unix time at which the configuration in force was applied."}
	ConfigOverrides = &Metric{Name: "levee_config_overrides", Unit: "{override}", Kind: Gauge,
		Help: "Runtime overrides in force (set through the admin endpoint)."}

	AdminUnauthorized = &Metric{Name: "levee_admin_unauthorized_total", Unit: unitRequests, Kind: Counter,
		Help: "Admin endpoint requests refused with 401."}
	AdminChanges = &Metric{Name: "levee_admin_changes_total", Unit: unitRequests, Kind: Counter,
		Help: "Admin endpoint requests that changed something (reload, dry-run, drill)."}
)

// ConfigMetrics lists the metrics ReadConfig gives; AdminMetrics those
// ReadAdmin gives.
var (
	ConfigMetrics = []*Metric{ConfigReloads, ConfigChanges, ConfigGeneration, ConfigLastOK, ConfigAppliedAt, ConfigOverrides}
	AdminMetrics  = []*Metric{AdminUnauthorized, AdminChanges}
)

// Reloads is what ReadConfig reads: a configuration reloader's counters.
// Its fields are those of package config's Stats, in the same order, so
// that an exporter converts one into the other (instrument.Reloads(s));
// this package may not import config (a core package cannot import an
// adapter), and the conversion stops compiling if either side changes.
type Reloads struct {
	Generation                   uint64
	Applied, Rejected, Unchanged uint64
	Changes                      uint64
	AppliedAt                    time.Time
	LastOK                       bool
	Overrides                    int
}

// ReadConfig gives the readings of r to emit.
func ReadConfig(r Reloads, emit Emit) {
	emit(ConfigReloads, float64(r.Applied), "applied")
	emit(ConfigReloads, float64(r.Rejected), "rejected")
	emit(ConfigReloads, float64(r.Unchanged), "unchanged")
	emit(ConfigChanges, float64(r.Changes))
	emit(ConfigGeneration, float64(r.Generation))
	emit(ConfigLastOK, b2f(r.LastOK))
	emit(ConfigAppliedAt, float64(r.AppliedAt.UnixNano())/1e9)
	emit(ConfigOverrides, float64(r.Overrides))
}

// ReadAdmin gives an admin endpoint's counters to emit.
func ReadAdmin(unauthorized, changes uint64, emit Emit) {
	emit(AdminUnauthorized, float64(unauthorized))
	emit(AdminChanges, float64(changes))
}
