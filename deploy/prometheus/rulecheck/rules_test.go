package rulecheck

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveeprom"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

const rulesFile = "../levee-alerts.yml"

// exported returns the metric names leveeprom exports.
func exported(t *testing.T) []string {
	t.Helper()
	ctl := admit.New(admit.WithSignals(fixed{}))
	ctl.Step(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) // the signals appear after a Step
	tc := leveeprom.NewThrottleCollector()
	tc.Add("api", throttle.New())
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(leveeprom.NewAdmitCollector(ctl), tc, leveeprom.NewBudgetCollector(retry.NewBudget()), leveeprom.NewEventCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return names
}

type fixed struct{}

func (fixed) Name() string    { return "cpu" }
func (fixed) Value() float64  { return 0.5 }
func (fixed) Target() float64 { return 0.8 }

func TestRulesFile(t *testing.T) {
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		return
	}
	metrics := exported(t)
	n := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			n++
			names, err := MetricNames(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			if len(names) == 0 {
				t.Errorf("%s: selects no metric", r.Alert)
			}
			for _, m := range names {
				if !slices.Contains(metrics, m) {
					t.Errorf("%s: %s is not exported by leveeprom", r.Alert, m)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no rules")
	}
}

func TestMetricNamesBadExpr(t *testing.T) {
	for _, expr := range []string{"", "rate(", "sum by (a (x)", `x{a="b"`} {
		if _, err := MetricNames(expr); err == nil {
			t.Errorf("MetricNames(%q): nil error, want a parse error", expr)
		}
	}
}
