package leveeprom

import (
	"reflect"

	"github.com/prometheus/client_golang/prometheus"

	leveeconfig "github.com/levee-dev/levee/config"
)

// AdminCounter is what ConfigCollector reads of an admin endpoint:
// *leveehttp.Admin implements it.
type AdminCounter interface {
	// Counts returns the requests refused with 401 and the requests that
	// changed something, since the endpoint was built.
	Counts() (unauthorized, changes uint64)
}

// ConfigCollector exports a config.Reloader's reload counters and, when
// given one, a leveehttp.Admin's. It reads them when scraped. Safe for
// concurrent use.
type ConfigCollector struct {
	rl    *leveeconfig.Reloader
	admin AdminCounter

	reloads, changes, generation, lastOK *prometheus.Desc
	appliedAt, overrides                 *prometheus.Desc
	unauthorized, adminChanges           *prometheus.Desc
}

// NewConfigCollector returns a collector for rl and admin, a
// *leveehttp.Admin (nil: no admin metrics); register it on your own
// prometheus.Registerer. A nil rl panics. The metrics are listed in the
// package documentation.
func NewConfigCollector(rl *leveeconfig.Reloader, admin AdminCounter, opts ...Option) *ConfigCollector {
	if rl == nil {
		panic("leveeprom: NewConfigCollector with a nil Reloader")
	}
	if v := reflect.ValueOf(admin); admin != nil && v.Kind() == reflect.Pointer && v.IsNil() {
		admin = nil // a nil *leveehttp.Admin: no admin metrics
	}
	cl := newConfig(opts).constLabels
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	return &ConfigCollector{
		rl:    rl,
		admin: admin,
		reloads: d("levee_config_reloads_total",
			"Configuration reloads by result: applied (a change put in force), rejected (the configuration in force kept), unchanged.", "result"),
		changes: d("levee_config_changes_total",
			"Configuration fields changed by applied reloads."),
		generation: d("levee_config_generation",
			"Generation of the configuration in force (1 at start, +1 per applied change)."),
		lastOK: d("levee_config_last_reload_success",
			"1 if the last reload was applied or found nothing to change, 0 if it was rejected."),
		appliedAt: d("levee_config_applied_timestamp_seconds",
			"Unix time at which the configuration in force was applied."),
		overrides: d("levee_config_overrides",
			"Runtime overrides in force (set through the admin endpoint)."),
		unauthorized: d("levee_admin_unauthorized_total",
			"Admin endpoint requests refused with 401."),
		adminChanges: d("levee_admin_changes_total",
			"Admin endpoint requests that changed something (reload, dry-run, drill)."),
	}
}

// Describe implements prometheus.Collector.
func (c *ConfigCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.reloads, c.changes, c.generation, c.lastOK, c.appliedAt, c.overrides} {
		ch <- d
	}
	if c.admin != nil {
		ch <- c.unauthorized
		ch <- c.adminChanges
	}
}

// Collect implements prometheus.Collector.
func (c *ConfigCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.rl.Stats()
	counter := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, lv...)
	}
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	counter(c.reloads, float64(s.Applied), "applied")
	counter(c.reloads, float64(s.Rejected), "rejected")
	counter(c.reloads, float64(s.Unchanged), "unchanged")
	counter(c.changes, float64(s.Changes))
	gauge(c.generation, float64(s.Generation))
	gauge(c.lastOK, b2f(s.LastOK))
	gauge(c.appliedAt, float64(s.AppliedAt.UnixNano())/1e9)
	gauge(c.overrides, float64(s.Overrides))
	if c.admin != nil {
		unauthorized, changes := c.admin.Counts()
		counter(c.unauthorized, float64(unauthorized))
		counter(c.adminChanges, float64(changes))
	}
}
