package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/internal/instrument"
	"github.com/levee-dev/levee/overload"
)

// OverloadCollector exports an overload.Manager's state: its level, each
// resource against its limit (levee_overload_resource_ratio, _used,
// _limit and _level, labelled by signal), each action's state and time
// active (levee_overload_action_active and
// levee_overload_action_active_seconds_total, labelled by kind), the
// requests its gate refused (levee_overload_refusals_total by criticality
// and kind), the requests in flight and their cap, and the collections it
// forced. It reads Manager.Status when scraped and adds nothing to the
// request path. It is safe for concurrent use.
type OverloadCollector struct {
	d descs
	m *overload.Manager
}

// NewOverloadCollector returns a collector for m; register it on your own
// Registerer. A nil m panics.
func NewOverloadCollector(m *overload.Manager, opts ...Option) *OverloadCollector {
	if m == nil {
		panic("leveeprom: NewOverloadCollector with a nil manager")
	}
	return &OverloadCollector{d: newDescs(instrument.OverloadMetrics, opts), m: m}
}

// Describe implements prometheus.Collector.
func (c *OverloadCollector) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector.
func (c *OverloadCollector) Collect(ch chan<- prometheus.Metric) {
	instrument.ReadOverload(c.m.Status(), c.d.emitTo(ch))
}
