package rulecheck

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/model/labels"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	leveeconfig "github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/leveeprom"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// targetLabels are added by Prometheus to every scraped series; const
// labels (leveeprom.WithConstLabels) may add more, but levee's own rules
// and dashboard use only these.
var targetLabels = []string{"instance", "job"}

// series maps each metric name leveeprom exposes to the label sets of its
// series.
type series map[string][]labels.Labels

// exported registers every leveeprom collector, fed so that every metric
// and every label value appears (a controller with signals, a throttle, a
// budget, the state-change and probe counters, a configuration reloader with
// an admin endpoint), gathers them and returns the series.
func exported(t *testing.T) series {
	t.Helper()
	ctl := admit.New(admit.WithSignals(fixed{"cpu", 0.5, 0.8}, fixed{"sched_latency", 0.002, 0.01}))
	ctl.Step(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // the signals appear after a Step
	tc := leveeprom.NewThrottleCollector()
	tc.Add("api", throttle.New())
	reg := prometheus.NewPedanticRegistry()
	base := leveeconfig.Default()
	base.Admin.Enabled = true
	base.Admin.Token = "0123456789abcdef0123"
	rl, err := leveeconfig.NewReloader(base, leveeconfig.WithEnv(nil), leveeconfig.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	admin := leveehttp.NewAdmin(rl, leveehttp.WithAdminLogger(slog.New(slog.DiscardHandler)))
	reg.MustRegister(leveeprom.NewAdmitCollector(ctl), tc, leveeprom.NewBudgetCollector(retry.NewBudget()), leveeprom.NewEventCollector(),
		leveeprom.NewProbeCollector(func() uint64 { return 0 }), leveeprom.NewConfigCollector(rl, admin))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			b := labels.NewBuilder(labels.EmptyLabels())
			for _, lp := range m.GetLabel() {
				b.Set(lp.GetName(), lp.GetValue())
			}
			out[mf.GetName()] = append(out[mf.GetName()], b.Labels())
		}
	}
	if len(out) < 45 || len(out["levee_rejections_total"]) != levee.NumCriticalities*3 {
		t.Fatalf("gathered %d metrics, %d rejection series: the collectors were not fed", len(out), len(out["levee_rejections_total"]))
	}
	return out
}

type fixed struct {
	name          string
	value, target float64
}

func (f fixed) Name() string    { return f.name }
func (f fixed) Value() float64  { return f.value }
func (f fixed) Target() float64 { return f.target }

// checkSelectors checks every selector of expr: its metric is one levee
// exports (or, when recorded is given, a series a rule records), each of
// its matchers names a label that metric has (or a target label), and
// together they match at least one series levee exports. It returns the
// names of levee's metrics expr selects.
func checkSelectors(expr string, exp series, recorded []string) ([]string, error) {
	sels, err := selectors(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, vs := range sels {
		if slices.Contains(recorded, vs.Name) {
			continue
		}
		have, ok := exp[vs.Name]
		if !ok {
			return nil, fmt.Errorf("%s: not a metric levee exports", vs)
		}
		names = append(names, vs.Name)
		if err := matchSome(vs.LabelMatchers, have); err != nil {
			return nil, fmt.Errorf("%s: %w", vs, err)
		}
	}
	return names, nil
}

// matchSome requires every matcher's label on the series (target labels
// aside) and at least one series matching all of them.
func matchSome(ms []*labels.Matcher, have []labels.Labels) error {
	var own []*labels.Matcher
	for _, m := range ms {
		switch {
		case m.Name == labels.MetricName || slices.Contains(targetLabels, m.Name):
		case !have[0].Has(m.Name):
			return fmt.Errorf("no label %q on this metric", m.Name)
		default:
			own = append(own, m)
		}
	}
	for _, l := range have {
		if allMatch(own, l) {
			return nil
		}
	}
	return fmt.Errorf("matches none of the series levee exports")
}

func allMatch(ms []*labels.Matcher, l labels.Labels) bool {
	for _, m := range ms {
		if !m.Matches(l.Get(m.Name)) {
			return false
		}
	}
	return true
}

func TestCheckSelectors(t *testing.T) {
	exp := exported(t)
	tests := []struct {
		expr    string
		wantErr string
	}{
		{`sum without (reason) (rate(levee_rejections_total{criticality="CRITICAL", reason="overloaded", instance=~".+"}[5m])) > 0`, ""},
		{`levee_signal_load_ratio{signal="cpu"} > 1`, ""},
		{`levee:overload_shed_ratio:rate5m{criticality="CRITICAL"} > 0.01`, ""},
		{`levee_headroom < 0.2`, "not a metric levee exports"},
		{`levee_rejections_total{tenant="a"}`, `no label "tenant"`},
		{`levee_rejections_total{criticality="critical"}`, "matches none"},
		{`levee_rejections_total{reason="busy"}`, "matches none"},
		{`levee_rejections_total{criticality="CRITICAL_PLUS", reason=~"overloaded|throttled"}`, ""},
		{`levee_state_changes_total{kind="overload_begin"}`, "matches none"},
		{`rate(levee_rejections_total[5m]`, "unclosed"},
	}
	for _, tt := range tests {
		_, err := checkSelectors(tt.expr, exp, []string{"levee:overload_shed_ratio:rate5m"})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("checkSelectors(%q) = %v, want nil", tt.expr, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("checkSelectors(%q) = %v, want an error containing %q", tt.expr, err, tt.wantErr)
		}
	}
}
