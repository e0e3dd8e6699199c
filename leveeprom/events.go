package leveeprom

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/admit"
)

// maxEventKinds bounds the event kinds counted; admit defines fewer.
const maxEventKinds = 32

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
	desc   *prometheus.Desc
	counts [maxEventKinds]atomic.Uint64
}

// NewEventCollector returns an EventCollector with every count at zero.
func NewEventCollector(opts ...Option) *EventCollector {
	return &EventCollector{desc: prometheus.NewDesc("levee_state_changes_total",
		"State changes of the admission controller, by kind (overload_start, overload_end, degrade_changed, drill_start, drill_end, no_retry_start, no_retry_end).",
		[]string{"kind"}, newConfig(opts).constLabels)}
}

// Observe counts e. It does not allocate; kinds it does not know are
// ignored.
func (c *EventCollector) Observe(e admit.Event) {
	if k := int(e.Kind); k > 0 && k < maxEventKinds {
		c.counts[k].Add(1)
	}
}

// Describe implements prometheus.Collector.
func (c *EventCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. Every kind admit names is
// exported, at zero until it happens.
func (c *EventCollector) Collect(ch chan<- prometheus.Metric) {
	for k := 1; k < maxEventKinds; k++ {
		name := admit.EventKind(k).String()
		if name == "unknown" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(c.counts[k].Load()), name)
	}
}
