package leveeprom

import (
	"reflect"

	"github.com/prometheus/client_golang/prometheus"

	leveeconfig "github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/internal/instrument"
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
	d     descs
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
	ms := instrument.ConfigMetrics
	if admin != nil {
		ms = append(ms[:len(ms):len(ms)], instrument.AdminMetrics...)
	}
	return &ConfigCollector{rl: rl, admin: admin, d: newDescs(ms, opts)}
}

// Describe implements prometheus.Collector.
func (c *ConfigCollector) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector.
func (c *ConfigCollector) Collect(ch chan<- prometheus.Metric) {
	emit := c.d.emitTo(ch)
	instrument.ReadConfig(instrument.Reloads(c.rl.Stats()), emit)
	if c.admin != nil {
		unauthorized, changes := c.admin.Counts()
		instrument.ReadAdmin(unauthorized, changes, emit)
	}
}
