package rulecheck

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
)

const (
	rulesFile = "../levee-alerts.yml"
	testsFile = "../levee-alerts.test.yml"
)

// loadRules parses the rules file with Prometheus's own loader (strict
// YAML, PromQL, templates) and returns its groups.
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return groups
}

// TestRulesFile checks every rule's selectors against the series leveeprom
// exposes and the conventions of levee's rules.
func TestRulesFile(t *testing.T) {
	groups := loadRules(t)
	exp := exported(t)
	var recorded []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded = append(recorded, r.Record)
			}
		}
	}
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			names, err := checkSelectors(r.Expr, exp, recorded)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if len(names) == 0 && !slices.ContainsFunc(recorded, func(rec string) bool { return strings.Contains(r.Expr, rec) }) {
				t.Errorf("%s: selects no metric levee exports", name)
			}
			if r.Record != "" {
				if !strings.HasPrefix(r.Record, "levee:") {
					t.Errorf("%s: a recording rule not named levee:…", name)
				}
				continue
			}
			alerts++
			if !strings.HasPrefix(r.Alert, "Levee") {
				t.Errorf("%s: an alert not named Levee…", name)
			}
			if s := r.Labels["severity"]; s != "page" && s != "ticket" {
				t.Errorf("%s: severity %q, want page or ticket", name, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", name, a)
				}
			}
		}
	}
	if alerts < 10 {
		t.Errorf("%d alerting rules, want the whole set", alerts)
	}
}

// TestRuleUnitTests runs levee-alerts.test.yml with Prometheus's rule
// engine: the fixtures' series in, the expected alerts (labels and
// rendered annotations) out.
func TestRuleUnitTests(t *testing.T) {
	for _, err := range RunRuleTests(testsFile) {
		t.Error(err)
	}
}

// TestRuleTestCoverage requires, for every alerting rule, a test in which
// it fires and one in which it stays silent, and fixtures made of series
// levee exports.
func TestRuleTestCoverage(t *testing.T) {
	groups := loadRules(t)
	f, err := readTestFile(testsFile)
	if err != nil {
		t.Fatal(err)
	}
	fires, silent := map[string]bool{}, map[string]bool{}
	exp := exported(t)
	p := parser.NewParser(parser.Options{})
	for _, tg := range f.Tests {
		for _, c := range tg.AlertRuleTests {
			if len(c.ExpAlerts) > 0 {
				fires[c.Alertname] = true
			} else {
				silent[c.Alertname] = true
			}
		}
		for _, s := range tg.InputSeries {
			l, err := p.ParseMetric(s.Series)
			if err != nil {
				t.Errorf("%s: series %q: %v", tg.Name, s.Series, err)
				continue
			}
			if _, ok := exp[l.Get(model.MetricNameLabel)]; !ok {
				t.Errorf("%s: series %s is not a metric levee exports", tg.Name, l)
			}
		}
	}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if !fires[r.Alert] {
				t.Errorf("%s: no test in which it fires", r.Alert)
			}
			if !silent[r.Alert] {
				t.Errorf("%s: no test in which it stays silent", r.Alert)
			}
		}
	}
}

// TestRunRuleTestsFails checks that the runner reports what is wrong: a
// wrong expectation, an alert that does not exist, a field promtool knows
// and the runner does not, a rule that fails to evaluate.
func TestRunRuleTestsFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("rules.yml", `
groups:
  - name: g
    rules:
      - alert: High
        expr: x > 1
        for: 2m
        labels: {severity: ticket}
        annotations: {summary: "x is {{ $value }}"}
`)
	write("broken.yml", `
groups:
  - name: g
    rules:
      - alert: Broken
        expr: x + on(a) group_left y
`)
	const series = "    input_series:\n      - {series: 'x{a=\"1\"}', values: '2+0x10'}\n      - {series: 'y{a=\"1\"}', values: '1+0x10'}\n      - {series: 'y{a=\"1\", b=\"2\"}', values: '1+0x10'}\n"
	const head = "rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n" + series
	tests := []struct {
		name, body string
		want       []string // substrings of the errors, in order
	}{
		{"passes", head + "    alert_rule_test:\n      - {eval_time: 1m, alertname: High, exp_alerts: []}\n      - eval_time: 2m\n        alertname: High\n        exp_alerts: [{exp_labels: {severity: ticket, a: '1'}, exp_annotations: {summary: 'x is 2'}}]\n", nil},
		{"fires too early", head + "    alert_rule_test:\n      - eval_time: 1m\n        alertname: High\n        exp_alerts: [{exp_labels: {severity: ticket, a: '1'}, exp_annotations: {summary: 'x is 2'}}]\n", []string{"alert High at 1m"}},
		{"wrong annotation", head + "    alert_rule_test:\n      - eval_time: 3m\n        alertname: High\n        exp_alerts: [{exp_labels: {severity: ticket, a: '1'}, exp_annotations: {summary: 'x is 3'}}]\n", []string{`summary="x is 2"`}},
		{"no such alert", head + "    alert_rule_test:\n      - {eval_time: 1m, alertname: Nope, exp_alerts: []}\n", []string{"no such alerting rule"}},
		{"wrong sample", head + "    promql_expr_test:\n      - {expr: x, eval_time: 1m, exp_samples: [{labels: 'x{a=\"1\"}', value: 3}]}\n", []string{"expr \"x\" at 1m"}},
		{"unknown field", head + "    fuzzy_compare: true\n", []string{"field fuzzy_compare not found"}},
		{"rule fails to evaluate", "rule_files: [broken.yml]\ntests:\n  - interval: 1m\n" + series + "    alert_rule_test:\n      - {eval_time: 1m, alertname: Broken, exp_alerts: []}\n", []string{"rule Broken at 0s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, err := range RunRuleTests(write(tt.name+".yml", tt.body)) {
				got = append(got, err.Error())
			}
			if len(tt.want) == 0 && len(got) > 0 {
				t.Errorf("errors %q, want none", got)
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(e string) bool { return strings.Contains(e, w) }) {
					t.Errorf("errors %q, want one containing %q", got, w)
				}
			}
		})
	}
}
