package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	leveeconfig "github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/internal/instrument"
	"github.com/levee-dev/levee/leveehttp"
)

// ConfigCollector exports a config.Reloader's reload counters and, when
// given one, a leveehttp.Admin's. It reads them when scraped. Safe for
// concurrent use.
type ConfigCollector struct {
	rl    *leveeconfig.Reloader
	admin *leveehttp.Admin
	d     descs
}

// NewConfigCollector returns a collector for rl and admin (nil: no admin
// metrics); register it on your own prometheus.Registerer. A nil rl
// panics. The metrics are listed in the package documentation.
func NewConfigCollector(rl *leveeconfig.Reloader, admin *leveehttp.Admin, opts ...Option) *ConfigCollector {
	if rl == nil {
		panic("leveeprom: NewConfigCollector with a nil Reloader")
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
		a := c.admin.Stats()
		instrument.ReadAdmin(a.Unauthorized, a.Changes, emit)
	}
}
