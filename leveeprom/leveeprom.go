package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/internal/instrument"
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
// "reason", "signal", "backend", "kind"); registration fails if they are.
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

// descs holds the Prometheus descriptions of a set of levee's metrics and
// turns readings into samples.
type descs struct {
	order []*prometheus.Desc
	by    map[*instrument.Metric]*prometheus.Desc
}

func newDescs(ms []*instrument.Metric, opts []Option) descs {
	cl := newConfig(opts).constLabels
	d := descs{by: make(map[*instrument.Metric]*prometheus.Desc, len(ms))}
	for _, m := range ms {
		pd := prometheus.NewDesc(m.Name, m.Help, m.Labels, cl)
		d.order = append(d.order, pd)
		d.by[m] = pd
	}
	return d
}

func (d descs) describe(ch chan<- *prometheus.Desc) {
	for _, pd := range d.order {
		ch <- pd
	}
}

// emitTo returns an instrument.Emit that sends each reading to ch.
func (d descs) emitTo(ch chan<- prometheus.Metric) instrument.Emit {
	return func(m *instrument.Metric, v float64, lv ...string) {
		t := prometheus.GaugeValue
		if m.Kind == instrument.Counter {
			t = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(d.by[m], t, v, lv...)
	}
}

// AdmitCollector exports an admit.Controller's state. It reads
// Controller.Snapshot when it is scraped and adds nothing to the accept
// path: a Controller with an AdmitCollector admits at the same cost as one
// without. It is safe for concurrent use.
type AdmitCollector struct {
	snapshot func() admit.Snapshot
	d        descs
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
	return &AdmitCollector{snapshot: snapshot, d: newDescs(instrument.AdmitMetrics, opts)}
}

// Describe implements prometheus.Collector.
func (c *AdmitCollector) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector. It takes one Snapshot.
func (c *AdmitCollector) Collect(ch chan<- prometheus.Metric) {
	instrument.ReadAdmit(c.snapshot(), c.d.emitTo(ch))
}
