package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/internal/instrument"
)

// counter exports one count read when scraped (ProbeCollector,
// ConnCollector).
type counter struct {
	d    descs
	n    func() uint64
	read func(uint64, instrument.Emit)
}

func newCounter(name string, m *instrument.Metric, n func() uint64, read func(uint64, instrument.Emit), opts []Option) counter {
	if n == nil {
		panic("leveeprom: " + name + " with a nil count")
	}
	return counter{d: newDescs([]*instrument.Metric{m}, opts), n: n, read: read}
}

// Describe implements prometheus.Collector.
func (c *counter) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector.
func (c *counter) Collect(ch chan<- prometheus.Metric) { c.read(c.n(), c.d.emitTo(ch)) }
