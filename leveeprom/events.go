package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/internal/instrument"
)

// EventCollector counts an admission controller's state changes (overload
// start and end, degradation level changes, drills, no-retry start and
// end) by kind. Pass its Observe method to admit.WithObserver:
//
//	ev := leveeprom.NewEventCollector()
//	ctl := admit.New(admit.WithObserver(ev.Observe), …)
//	reg.MustRegister(ev, leveeprom.NewAdmitCollector(ctl))
//
// The controller calls Observe from its control loop, never per request.
// It is safe for concurrent use.
type EventCollector struct {
	d      descs
	counts instrument.Events
}

// NewEventCollector returns an EventCollector with every count at zero.
func NewEventCollector(opts ...Option) *EventCollector {
	return &EventCollector{d: newDescs([]*instrument.Metric{instrument.StateChanges}, opts)}
}

// Observe counts e. It does not allocate; kinds it does not know are
// ignored.
func (c *EventCollector) Observe(e admit.Event) { c.counts.Observe(e) }

// Describe implements prometheus.Collector.
func (c *EventCollector) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector. Every kind admit names is
// exported, at zero until it happens.
func (c *EventCollector) Collect(ch chan<- prometheus.Metric) { c.counts.Read(c.d.emitTo(ch)) }
