package leveeprom

import "github.com/levee-dev/levee/internal/instrument"

// ProbeCollector exports the health and readiness requests a server let
// through without admission: leveehttp's Handler.Probes (GET or HEAD on its
// health paths) or leveegrpc's Server.Probes (its exempt methods), as
// levee_health_probes_total. Probes are never shed, so they are counted
// apart from admissions and rejections: a probe rate far above what the
// orchestrator sends says someone uses the exemption. It reads the count
// when scraped and adds nothing to the request path; it is safe for
// concurrent use.
type ProbeCollector struct{ counter }

// NewProbeCollector returns a collector of the count probes returns, for
// example (*leveehttp.Handler).Probes. Register one per server, telling
// several apart with WithConstLabels. A nil probes panics.
func NewProbeCollector(probes func() uint64, opts ...Option) *ProbeCollector {
	return &ProbeCollector{newCounter("NewProbeCollector", instrument.HealthProbes, probes, instrument.ReadProbes, opts)}
}
