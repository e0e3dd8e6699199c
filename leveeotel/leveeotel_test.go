package leveeotel

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/attribute"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	leveeconfig "github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/internal/instrument"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/leveeprom"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

type fixedSignal struct {
	name          string
	value, target float64
}

func (s fixedSignal) Name() string    { return s.name }
func (s fixedSignal) Value() float64  { return s.value }
func (s fixedSignal) Target() float64 { return s.target }

// plant is levee's state after an overload on virtual time: a controller
// that shed (with its event counts), a throttle group with a backend that
// rejected, and a retry budget that granted and denied retries.
type plant struct {
	ctl       *admit.Controller
	reloader  *leveeconfig.Reloader
	admin     *leveehttp.Admin
	probes    func() uint64
	gone      func() uint64
	ev        *Events
	promEv    *leveeprom.EventCollector
	throttles *throttle.Group
	budget    *retry.Budget
	overload  *overload.Manager
}

func newPlant(t *testing.T) *plant {
	t.Helper()
	p := &plant{ev: new(Events), promEv: leveeprom.NewEventCollector()}
	p.ctl = admit.New(
		admit.WithSignals(fixedSignal{"cpu", 1.2, 0.8}, fixedSignal{"queue_delay", math.NaN(), 0.005}),
		admit.WithObserver(func(e admit.Event) { p.ev.Observe(e); p.promEv.Observe(e) }),
	)
	now := t0
	for step := range 40 {
		for i := range 50 {
			crit := levee.Criticalities()[i%levee.NumCriticalities]
			ctx := levee.WithCriticality(context.Background(), crit)
			if tk, err := p.ctl.AdmitAt(ctx, now.Add(time.Duration(i)*time.Millisecond)); err == nil {
				tk.DoneAt(now.Add(time.Duration(i+1)*time.Millisecond), nil)
			}
		}
		now = now.Add(admit.DefaultPeriod)
		p.ctl.Step(now)
		_ = step
	}
	s := p.ctl.Snapshot()
	if s.Rejected[levee.Sheddable][levee.Overloaded] == 0 || s.Admitted[levee.Critical] == 0 {
		t.Fatalf("scenario: want shedding and admissions, got admitted %v rejected %v", s.Admitted, s.Rejected)
	}

	p.throttles = throttle.NewGroup(throttle.WithSeed(1))
	for i := range 500 {
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		th := p.throttles.Get("search")
		if th.AllowAt(at, levee.Sheddable) == nil {
			th.DoneAt(at, levee.Sheddable, i%5 == 0)
		}
	}
	base := leveeconfig.Default()
	base.Admin.Enabled = true
	base.Admin.Token = "0123456789abcdef0123"
	rl, err := leveeconfig.NewReloader(base, leveeconfig.WithEnv(nil), leveeconfig.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	p.reloader = rl
	p.admin = leveehttp.NewAdmin(rl, leveehttp.WithAdminLogger(slog.New(slog.DiscardHandler)))
	rl.SetOverride("admit.dry_run", "true")                                                                    // applied
	rl.SetOverride("admit.dry_run", "maybe")                                                                   // rejected
	p.admin.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/levee/admin/config", nil)) // 401
	p.probes = func() uint64 { return 42 }
	p.gone = func() uint64 { return 17 }

	p.overload = overload.New(overload.WithResources(overload.Resource{
		Name: "memory", Unit: "bytes", Enter: [3]float64{0.8, 0.9, 0.95},
		Read: func() overload.Reading { return overload.Reading{Value: 0.97, Used: 970, Limit: 1000} },
	}))
	p.overload.Step(t0)
	p.overload.EnterAt(t0, levee.Sheddable, 0) // refused: critical only
	p.overload.Step(t0.Add(time.Second))

	p.budget = retry.NewBudget(retry.WithRatio(0.1, 10*time.Second), retry.WithFloor(1, time.Minute))
	for i := range 20 {
		p.budget.RequestAt(t0.Add(time.Duration(i) * time.Millisecond))
	}
	for range 5 {
		p.budget.TryRetryAt(t0.Add(time.Second))
	}
	return p
}

// observeAll observes everything in p through an SDK MeterProvider whose
// readers are given.
func (p *plant) observeAll(t *testing.T, mp *sdkmetric.MeterProvider, opts ...Option) {
	t.Helper()
	meter := mp.Meter(Scope)
	ts := new(Throttles)
	ts.AddGroup(p.throttles)
	for _, err := range []error{
		second(ObserveAdmit(meter, p.ctl, opts...)),
		second(ObserveEvents(meter, p.ev, opts...)),
		second(ObserveThrottles(meter, ts, opts...)),
		second(ObserveBudget(meter, p.budget, opts...)),
		second(ObserveProbes(meter, p.probes, opts...)),
		second(ObserveConnsGone(meter, p.gone, opts...)),
		second(ObserveConfig(meter, p.reloader, p.admin, opts...)),
		second(ObserveOverload(meter, p.overload, opts...)),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// prometheusRegistry registers leveeprom's collectors for p.
func (p *plant) prometheusRegistry(t *testing.T) *prometheus.Registry {
	t.Helper()
	tc := leveeprom.NewThrottleCollector()
	tc.AddGroup(p.throttles)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(leveeprom.NewAdmitCollector(p.ctl), p.promEv, tc, leveeprom.NewBudgetCollector(p.budget),
		leveeprom.NewProbeCollector(p.probes), leveeprom.NewConnCollector(p.gone), leveeprom.NewConfigCollector(p.reloader, p.admin),
		leveeprom.NewOverloadCollector(p.overload))
	return reg
}

// point is one data point, keyed by metric name and sorted label pairs.
type point struct {
	kind  string // counter or gauge
	value float64
}

func key(name string, labels map[string]string) string {
	var pairs []string
	for k, v := range labels {
		if !strings.HasPrefix(k, "otel_scope_") {
			pairs = append(pairs, k+"="+v)
		}
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

func fromPrometheus(t *testing.T, g prometheus.Gatherer) map[string]point {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]point{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "levee_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key(mf.GetName(), labels)] = point{"counter", m.GetCounter().GetValue()}
			case dto.MetricType_GAUGE:
				out[key(mf.GetName(), labels)] = point{"gauge", m.GetGauge().GetValue()}
			default:
				t.Errorf("%s: type %v", mf.GetName(), mf.GetType())
			}
		}
	}
	return out
}

// fromOTel collects r and returns its data points and each instrument's
// unit.
func fromOTel(t *testing.T, r *sdkmetric.ManualReader) (map[string]point, map[string]string) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]point{}
	units := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != Scope {
			t.Errorf("scope %q, want %q", sm.Scope.Name, Scope)
		}
		for _, m := range sm.Metrics {
			units[m.Name] = m.Unit
			add := func(kind string, dps []metricdata.DataPoint[float64]) {
				for _, dp := range dps {
					labels := map[string]string{}
					for _, kv := range dp.Attributes.ToSlice() {
						labels[string(kv.Key)] = kv.Value.AsString()
					}
					out[key(m.Name, labels)] = point{kind, dp.Value}
				}
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[float64]:
				if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
					t.Errorf("%s: a sum that is not a monotonic cumulative counter", m.Name)
				}
				add("counter", d.DataPoints)
			case metricdata.Gauge[float64]:
				add("gauge", d.DataPoints)
			default:
				t.Errorf("%s: data %T", m.Name, m.Data)
			}
		}
	}
	return out, units
}

func same(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// TestSameAsLeveeprom observes one plant both ways and requires the same
// data points: names, kinds, label sets and values.
func TestSameAsLeveeprom(t *testing.T) {
	p := newPlant(t)
	want := fromPrometheus(t, p.prometheusRegistry(t))

	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer mp.Shutdown(context.Background())
	p.observeAll(t, mp)
	got, units := fromOTel(t, r)

	// 28 admission, rejection and would-reject counters, 26 single values,
	// 3 per signal, 7 event kinds, 16 throttle points, 3 budget counters, 1
	// probe count, 10 configuration and admin points.
	if len(want) < 90 {
		t.Fatalf("leveeprom exports only %d points: the scenario is too small", len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: exported by leveeprom, not observed", k)
		case g.kind != w.kind || !same(g.value, w.value):
			t.Errorf("%s: observed %s %v, leveeprom %s %v", k, g.kind, g.value, w.kind, w.value)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: observed, not exported by leveeprom", k)
		}
	}
	for _, m := range instrument.All() {
		if u, ok := units[m.Name]; !ok || u != m.Unit {
			t.Errorf("%s: unit %q (observed %v), want %q", m.Name, u, ok, m.Unit)
		}
	}
}

// TestPrometheusExporterNames sends the instruments through
// OpenTelemetry's Prometheus exporter, with its default name translation
// (unit suffixes, _total, _ratio), and requires exactly leveeprom's metric
// families: the same names, types and label names.
func TestPrometheusExporterNames(t *testing.T) {
	p := newPlant(t)
	want := families(t, p.prometheusRegistry(t))

	reg := prometheus.NewPedanticRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	defer mp.Shutdown(context.Background())
	p.observeAll(t, mp)
	got := families(t, reg)

	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: not exported through OpenTelemetry", name)
		} else if g != w {
			t.Errorf("%s: through OpenTelemetry %s, leveeprom %s", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: exported through OpenTelemetry, not by leveeprom", name)
		}
	}
}

// families returns each levee_ family's type and sorted label names
// (OpenTelemetry's scope labels aside).
func families(t *testing.T, g prometheus.Gatherer) map[string]string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "levee_") {
			continue
		}
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !strings.HasPrefix(lp.GetName(), "otel_scope_") && !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
			}
		}
		sort.Strings(labels)
		out[mf.GetName()] = fmt.Sprintf("%v%v", mf.GetType(), labels)
	}
	return out
}

// TestAttributesAndUnregister observes two controllers on one Meter, told
// apart by an attribute, then unregisters one.
func TestAttributesAndUnregister(t *testing.T) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer mp.Shutdown(context.Background())
	meter := mp.Meter(Scope)
	ctls := map[string]*admit.Controller{}
	regs := map[string]interface{ Unregister() error }{}
	for _, name := range []string{"api", "batch"} {
		ctls[name] = admit.New(admit.WithSignals(fixedSignal{"cpu", 0.4, 0.8}))
		ctls[name].Step(t0)
		reg, err := ObserveAdmit(meter, ctls[name], WithAttributes(attribute.String("controller", name)))
		if err != nil {
			t.Fatal(err)
		}
		regs[name] = reg
	}
	ctx := levee.WithCriticality(context.Background(), levee.Critical)
	for range 3 {
		if tk, err := ctls["api"].AdmitAt(ctx, t0); err == nil {
			tk.DoneAt(t0, nil)
		}
	}
	got, _ := fromOTel(t, r)
	for _, tt := range []struct {
		controller string
		want       float64
	}{{"api", 3}, {"batch", 0}} {
		k := key("levee_admissions_total", map[string]string{"controller": tt.controller, "criticality": "CRITICAL"})
		if p, ok := got[k]; !ok || p.value != tt.want {
			t.Errorf("%s = %v (present %v), want %v", k, p.value, ok, tt.want)
		}
	}

	if err := regs["api"].Unregister(); err != nil {
		t.Fatal(err)
	}
	got, _ = fromOTel(t, r)
	for k := range got {
		if strings.Contains(k, "controller=api") {
			t.Errorf("%s observed after Unregister", k)
			break
		}
	}
	if _, ok := got[key("levee_admissions_total", map[string]string{"controller": "batch", "criticality": "CRITICAL"})]; !ok {
		t.Error("the other controller stopped being observed")
	}
}

func TestErrors(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())
	meter := mp.Meter(Scope)
	ctl := admit.New()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil meter", second(ObserveAdmit(nil, ctl)), "nil Meter"},
		{"nil controller", second(ObserveAdmit(meter, nil)), "nil controller"},
		{"nil events", second(ObserveEvents(meter, nil)), "nil Events"},
		{"nil throttles", second(ObserveThrottles(meter, nil)), "nil Throttles"},
		{"nil probes", second(ObserveProbes(meter, nil)), "nil count"},
		{"nil connections", second(ObserveConnsGone(meter, nil)), "nil count"},
		{"nil reloader", second(ObserveConfig(meter, nil, nil)), "nil Reloader"},
		{"reserved attribute", second(ObserveAdmit(meter, ctl, WithAttributes(attribute.String("signal", "x")))), `"signal"`},
		{"reserved attribute on a budget", second(ObserveBudget(meter, nil, WithAttributes(attribute.String("kind", "x")))), `"kind"`},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) || !strings.HasPrefix(tt.err.Error(), "leveeotel: ") {
			t.Errorf("%s: error %v, want one containing %q", tt.name, tt.err, tt.want)
		}
	}
	if err := second(ObserveBudget(meter, nil, nil, WithAttributes(attribute.String("budget", "default")))); err != nil {
		t.Errorf("ObserveBudget(nil budget, nil option): %v", err)
	}
}
