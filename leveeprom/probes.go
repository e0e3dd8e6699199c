package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/internal/instrument"
)

// ProbeCollector exports the health and readiness requests a server let
// through without admission: leveehttp's Handler.Probes (GET or HEAD on its
// health paths) or leveegrpc's Server.Probes (its exempt methods), as
// levee_health_probes_total. Probes are never shed, so they are counted
// apart from admissions and rejections: a probe rate far above what the
// orchestrator sends says someone uses the exemption. It reads the count
// when scraped and adds nothing to the request path; it is safe for
// concurrent use.
type ProbeCollector struct {
	d      descs
	probes func() uint64
}

// NewProbeCollector returns a collector of the count probes returns, for
// example (*leveehttp.Handler).Probes. Register one per server, telling
// several apart with WithConstLabels. A nil probes panics.
func NewProbeCollector(probes func() uint64, opts ...Option) *ProbeCollector {
	if probes == nil {
		panic("leveeprom: NewProbeCollector with a nil count")
	}
	return &ProbeCollector{d: newDescs([]*instrument.Metric{instrument.HealthProbes}, opts), probes: probes}
}

// Describe implements prometheus.Collector.
func (c *ProbeCollector) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector.
func (c *ProbeCollector) Collect(ch chan<- prometheus.Metric) {
	instrument.ReadProbes(c.probes(), c.d.emitTo(ch))
}
