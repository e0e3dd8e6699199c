package leveeotel

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/levee-dev/levee/admit"
	leveeconfig "github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/internal/instrument"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// Scope is the instrumentation scope name to create levee's Meter under:
//
//	meter := provider.Meter(leveeotel.Scope)
const Scope = "github.com/levee-dev/levee"

// Option configures an observation.
type Option func(*config)

type config struct {
	attrs []attribute.KeyValue
}

// WithAttributes adds fixed attributes to every observation, to tell apart
// several controllers (or budgets, or throttle sets) observed on one
// Meter, e.g. attribute.String("controller", "api"). Default: none. The
// keys must not be ones levee uses itself ("criticality", "reason",
// "signal", "backend", "kind", "result"): the Observe functions return an
// error if they are.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, kv...) }
}

// reserved are the attribute keys levee's instruments use.
var reserved = []string{
	instrument.LabelCriticality, instrument.LabelReason, instrument.LabelSignal,
	instrument.LabelBackend, instrument.LabelKind, instrument.LabelResult,
}

func newConfig(opts []Option) (config, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	for _, kv := range c.attrs {
		if slices.Contains(reserved, string(kv.Key)) {
			return c, fmt.Errorf("leveeotel: attribute %q is one levee's instruments use", kv.Key)
		}
	}
	return c, nil
}

// ObserveAdmit observes ctl through meter: the instruments listed in
// leveeprom's documentation under "Admission", from one
// Controller.Snapshot per collection. Unregister the returned Registration
// to stop. It returns an error for a nil meter or ctl, a reserved
// attribute key, or an instrument the meter refuses.
func ObserveAdmit(meter metric.Meter, ctl *admit.Controller, opts ...Option) (metric.Registration, error) {
	if ctl == nil {
		return nil, errors.New("leveeotel: ObserveAdmit with a nil controller")
	}
	return observe(meter, instrument.AdmitMetrics, func(emit instrument.Emit) {
		instrument.ReadAdmit(ctl.Snapshot(), emit)
	}, opts)
}

// ObserveBudget observes the retry budget b (retry.DefaultBudget() when
// nil) through meter: requests counted, retries granted and retries
// denied.
func ObserveBudget(meter metric.Meter, b *retry.Budget, opts ...Option) (metric.Registration, error) {
	if b == nil {
		b = retry.DefaultBudget()
	}
	return observe(meter, instrument.BudgetMetrics, func(emit instrument.Emit) {
		instrument.ReadBudget(b.Stats(), emit)
	}, opts)
}

// ObserveProbes observes the count probes returns as
// levee_health_probes_total: the health and readiness requests a server
// let through without admission, for example (*leveehttp.Handler).Probes.
func ObserveProbes(meter metric.Meter, probes func() uint64, opts ...Option) (metric.Registration, error) {
	return observeCount(meter, "ObserveProbes", instrument.HealthProbes, probes, instrument.ReadProbes, opts)
}

// ObserveConnsGone observes the count gone returns as
// levee_connections_gone_total: the connections a server closed unread at
// their accept because their peer had closed them while they waited in
// the accept queue, for example the Gone method of a leveehttp.Listener.
func ObserveConnsGone(meter metric.Meter, gone func() uint64, opts ...Option) (metric.Registration, error) {
	return observeCount(meter, "ObserveConnsGone", instrument.ConnsGone, gone, instrument.ReadConnsGone, opts)
}

// observeCount observes one count n reads as m (ObserveProbes,
// ObserveConnsGone).
func observeCount(meter metric.Meter, name string, m *instrument.Metric, n func() uint64, read func(uint64, instrument.Emit), opts []Option) (metric.Registration, error) {
	if n == nil {
		return nil, errors.New("leveeotel: " + name + " with a nil count")
	}
	return observe(meter, []*instrument.Metric{m}, func(emit instrument.Emit) { read(n(), emit) }, opts)
}

// ObserveConfig observes a config.Reloader's reload counters and, when
// admin is not nil, the admin endpoint's.
func ObserveConfig(meter metric.Meter, rl *leveeconfig.Reloader, admin *leveehttp.Admin, opts ...Option) (metric.Registration, error) {
	if rl == nil {
		return nil, errors.New("leveeotel: ObserveConfig with a nil Reloader")
	}
	ms := instrument.ConfigMetrics
	if admin != nil {
		ms = append(ms[:len(ms):len(ms)], instrument.AdminMetrics...)
	}
	return observe(meter, ms, func(emit instrument.Emit) {
		instrument.ReadConfig(instrument.Reloads(rl.Stats()), emit)
		if admin != nil {
			a := admin.Stats()
			instrument.ReadAdmin(a.Unauthorized, a.Changes, emit)
		}
	}, opts)
}

// Events counts an admission controller's state changes (overload start
// and end, degradation changes, drills, no-retry start and end) by kind.
// Pass its Observe method to admit.WithObserver and observe it with
// ObserveEvents. The zero value is ready. It is safe for concurrent use.
type Events struct {
	counts instrument.Events
}

// Observe counts e. The controller calls it from its control loop, never
// per request; it does not allocate.
func (e *Events) Observe(ev admit.Event) { e.counts.Observe(ev) }

// ObserveEvents observes ev's counts through meter as
// levee_state_changes_total{kind}, every kind admit names at zero until it
// happens.
func ObserveEvents(meter metric.Meter, ev *Events, opts ...Option) (metric.Registration, error) {
	if ev == nil {
		return nil, errors.New("leveeotel: ObserveEvents with nil Events")
	}
	return observe(meter, []*instrument.Metric{instrument.StateChanges}, ev.counts.Read, opts)
}

// Throttles is a set of client-side adaptive throttles observed under a
// "backend" attribute, like leveeprom.ThrottleCollector: single throttles
// added by name and whole groups, whose keys are read at every collection
// (a name added singly wins over the same key in a group). Keep the
// backend names bounded: key groups by backend service or host, never by
// request. The zero value is empty and ready. It is safe for concurrent
// use.
type Throttles struct {
	set instrument.Throttles
}

// Add observes t under backend, replacing any throttle added under the
// same name. A nil t removes it.
func (s *Throttles) Add(backend string, t *throttle.Throttle) { s.set.Add(backend, t) }

// AddGroup observes every throttle g holds at collection time, each under
// its key. A nil g is ignored.
func (s *Throttles) AddGroup(g *throttle.Group) { s.set.AddGroup(g) }

// ObserveThrottles observes the throttles in ts through meter, for every
// backend and criticality.
func ObserveThrottles(meter metric.Meter, ts *Throttles, opts ...Option) (metric.Registration, error) {
	if ts == nil {
		return nil, errors.New("leveeotel: ObserveThrottles with nil Throttles")
	}
	return observe(meter, instrument.ThrottleMetrics, ts.set.Read, opts)
}

// observe creates the instruments for ms on meter and registers one
// callback that takes a reading with read and observes it.
func observe(meter metric.Meter, ms []*instrument.Metric, read func(instrument.Emit), opts []Option) (metric.Registration, error) {
	if meter == nil {
		return nil, errors.New("leveeotel: nil Meter")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	byMetric := make(map[*instrument.Metric]metric.Float64Observable, len(ms))
	list := make([]metric.Observable, 0, len(ms))
	for _, m := range ms {
		o, err := newInstrument(meter, m)
		if err != nil {
			return nil, fmt.Errorf("leveeotel: %s: %w", m.Name, err)
		}
		byMetric[m] = o
		list = append(list, o)
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, obs metric.Observer) error {
		read(func(m *instrument.Metric, v float64, lv ...string) {
			kv := make([]attribute.KeyValue, 0, len(cfg.attrs)+len(lv))
			kv = append(kv, cfg.attrs...)
			for i, l := range m.Labels {
				kv = append(kv, attribute.String(l, lv[i]))
			}
			obs.ObserveFloat64(byMetric[m], v, metric.WithAttributeSet(attribute.NewSet(kv...)))
		})
		return nil
	}, list...)
	if err != nil {
		return nil, fmt.Errorf("leveeotel: %w", err)
	}
	return reg, nil
}

// newInstrument creates m's observable instrument: a counter (monotonic
// sum) or a gauge.
func newInstrument(meter metric.Meter, m *instrument.Metric) (metric.Float64Observable, error) {
	if m.Kind == instrument.Counter {
		return meter.Float64ObservableCounter(m.Name, metric.WithDescription(m.Help), metric.WithUnit(m.Unit))
	}
	return meter.Float64ObservableGauge(m.Name, metric.WithDescription(m.Help), metric.WithUnit(m.Unit))
}
