package rulecheck

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"go.yaml.in/yaml/v3"
)

// testFile is a rule unit-test file in the format of `promtool test rules`
// (the fields levee's tests use; any other field is an error, so that a
// file never passes here by ignoring what promtool would check).
type testFile struct {
	RuleFiles          []string       `yaml:"rule_files"`
	EvaluationInterval model.Duration `yaml:"evaluation_interval"`
	GroupEvalOrder     []string       `yaml:"group_eval_order"`
	Tests              []testGroup    `yaml:"tests"`
}

// testGroup is a set of input series and the alerts and expressions
// expected from them.
type testGroup struct {
	Name           string            `yaml:"name"`
	Interval       model.Duration    `yaml:"interval"`
	InputSeries    []inputSeries     `yaml:"input_series"`
	AlertRuleTests []alertTestCase   `yaml:"alert_rule_test"`
	PromQLTests    []promqlTestCase  `yaml:"promql_expr_test"`
	ExternalLabels map[string]string `yaml:"external_labels"`
	ExternalURL    string            `yaml:"external_url"`
}

type inputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type alertTestCase struct {
	EvalTime  model.Duration  `yaml:"eval_time"`
	Alertname string          `yaml:"alertname"`
	ExpAlerts []expectedAlert `yaml:"exp_alerts"`
}

type expectedAlert struct {
	ExpLabels      map[string]string `yaml:"exp_labels"`
	ExpAnnotations map[string]string `yaml:"exp_annotations"`
}

type promqlTestCase struct {
	Expr       string           `yaml:"expr"`
	EvalTime   model.Duration   `yaml:"eval_time"`
	ExpSamples []expectedSample `yaml:"exp_samples"`
}

type expectedSample struct {
	Labels string  `yaml:"labels"`
	Value  float64 `yaml:"value"`
}

// readTestFile reads and strictly decodes a test file, resolving its rule
// files relative to it.
func readTestFile(path string) (*testFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f testFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.RuleFiles) == 0 || len(f.Tests) == 0 {
		return nil, fmt.Errorf("%s: no rule_files or no tests", path)
	}
	for i, rf := range f.RuleFiles {
		if !filepath.IsAbs(rf) {
			f.RuleFiles[i] = filepath.Join(filepath.Dir(path), rf)
		}
	}
	if f.EvaluationInterval == 0 {
		f.EvaluationInterval = model.Duration(time.Minute)
	}
	for i := range f.Tests {
		if f.Tests[i].Interval == 0 {
			f.Tests[i].Interval = f.EvaluationInterval
		}
	}
	return &f, nil
}

// RunRuleTests runs the rule unit tests in path, a file in the format of
// `promtool test rules` (rule_files, evaluation_interval,
// group_eval_order, and tests with input_series, alert_rule_test and
// promql_expr_test), with the pieces promtool uses: promqltest's lazy
// loader for the input series, the rules package's manager and groups for
// the evaluation, the PromQL engine for the queries. It returns one error
// per failed expectation, naming the test, and nil when every expectation
// holds. Fields promtool knows but this runner does not (histograms,
// start_timestamp, fuzzy_compare) are reported as errors, never ignored.
func RunRuleTests(path string) []error {
	f, err := readTestFile(path)
	if err != nil {
		return []error{err}
	}
	var errs []error
	for i, tg := range f.Tests {
		name := tg.Name
		if name == "" {
			name = fmt.Sprintf("test #%d", i)
		}
		for _, err := range tg.run(f) {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errs
}

// run evaluates the rule groups from time 0 to the last eval_time, one
// evaluation interval at a time, and checks the firing alerts at each
// eval_time and the expressions at the end, as promtool does.
func (tg *testGroup) run(f *testFile) []error {
	load := fmt.Sprintf("load %v\n", time.Duration(tg.Interval))
	for _, s := range tg.InputSeries {
		load += fmt.Sprintf("  %s %s\n", s.Series, s.Values)
	}
	checks := slices.Clone(tg.AlertRuleTests)
	slices.SortStableFunc(checks, func(a, b alertTestCase) int { return int(a.EvalTime - b.EvalTime) })
	last := time.Duration(0)
	for _, c := range checks {
		last = max(last, time.Duration(c.EvalTime))
	}
	for _, c := range tg.PromQLTests {
		last = max(last, time.Duration(c.EvalTime))
	}
	e := evaluation{
		load:      load,
		ruleFiles: f.RuleFiles,
		order:     f.GroupEvalOrder,
		interval:  time.Duration(tg.Interval),
		every:     time.Duration(f.EvaluationInterval),
		until:     last,
		extLabels: labels.FromMap(tg.ExternalLabels),
		extURL:    tg.ExternalURL,
	}
	var errs []error
	// The alerts expected at eval_time t are compared with the evaluation
	// at ts when ts ≤ t < ts + interval.
	e.after = func(ts time.Duration, groups []*rules.Group) {
		for len(checks) > 0 && time.Duration(checks[0].EvalTime) < ts+e.every {
			if err := checkAlerts(groups, checks[0]); err != nil {
				errs = append(errs, err)
			}
			checks = checks[1:]
		}
	}
	e.atEnd = func(suite *promqltest.LazyLoader) {
		for _, c := range tg.PromQLTests {
			if err := checkExpr(suite, c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return append(e.run(), errs...)
}

// evaluation is one run of rule groups over loaded series.
type evaluation struct {
	load      string        // the input series in promqltest's load syntax
	ruleFiles []string      // rule files to load
	order     []string      // groups evaluated first, in this order
	interval  time.Duration // the groups' interval
	every     time.Duration // evaluation interval
	until     time.Duration // last evaluation, from time 0
	extLabels labels.Labels
	extURL    string
	after     func(ts time.Duration, groups []*rules.Group) // after each evaluation
	atEnd     func(suite *promqltest.LazyLoader)            // after the last one
}

// run loads the series, evaluates every group at 0, every, 2·every, … up
// to until, calling after each time, then atEnd. It returns the errors of
// loading and of evaluation; a rule that fails to evaluate stops the run.
func (e *evaluation) run() (errs []error) {
	suite, err := promqltest.NewLazyLoader(e.load, promqltest.LazyLoaderOpts{EnableAtModifier: true, EnableNegativeOffset: true})
	if err != nil {
		return []error{err}
	}
	defer func() {
		if err := suite.Close(); err != nil {
			errs = append(errs, err)
		}
	}()
	suite.SubqueryInterval = e.every

	m := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:    rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2: suite.Storage(),
		Context:      context.Background(),
		NotifyFunc:   func(context.Context, string, ...*rules.Alert) {},
		Logger:       promslog.NewNopLogger(),
	})
	byName, loadErrs := m.LoadGroups(e.interval, e.extLabels, e.extURL, nil, false, e.ruleFiles...)
	if loadErrs != nil {
		return loadErrs
	}
	groups := orderGroups(byName, e.order)
	for _, g := range groups {
		for _, r := range g.Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // so that `for` counts from the first evaluation
			}
		}
	}
	for at := time.Duration(0); at <= e.until; at += e.every {
		ts := time.Unix(0, 0).UTC().Add(at)
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				errs = append(errs, err)
				return
			}
			for _, g := range groups {
				g.Eval(suite.Context(), ts)
				for _, r := range g.Rules() {
					if err := r.LastError(); err != nil {
						errs = append(errs, fmt.Errorf("rule %s at %v: %w", r.Name(), at, err))
					}
				}
			}
		})
		if len(errs) > 0 {
			return errs
		}
		if e.after != nil {
			e.after(at, groups)
		}
	}
	if e.atEnd != nil {
		e.atEnd(suite)
	}
	return nil
}

// orderGroups returns the groups, those named in order first, in that
// order.
func orderGroups(byName map[string]*rules.Group, order []string) []*rules.Group {
	groups := make([]*rules.Group, 0, len(byName))
	for _, g := range byName {
		groups = append(groups, g)
	}
	rank := func(g *rules.Group) int {
		if i := slices.Index(order, g.Name()); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortFunc(groups, func(a, b *rules.Group) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a.Name(), b.Name())
	})
	return groups
}

// alertState is one alert's labels and annotations.
type alertState struct {
	labels, annotations labels.Labels
}

func (a alertState) String() string {
	return fmt.Sprintf("\n      labels: %s\n      annotations: %s", a.labels, a.annotations)
}

func compareAlerts(a, b alertState) int {
	if d := labels.Compare(a.labels, b.labels); d != 0 {
		return d
	}
	return labels.Compare(a.annotations, b.annotations)
}

// checkAlerts compares the alerts firing now under c.Alertname with the
// expected ones.
func checkAlerts(groups []*rules.Group, c alertTestCase) error {
	if c.Alertname == "" {
		return fmt.Errorf("an alert_rule_test at %v has no alertname", c.EvalTime)
	}
	var got, want []alertState
	found := false
	for _, g := range groups {
		for _, r := range g.Rules() {
			ar, ok := r.(*rules.AlertingRule)
			if !ok || ar.Name() != c.Alertname {
				continue
			}
			found = true
			for _, a := range ar.ActiveAlerts() {
				if a.State == rules.StateFiring {
					got = append(got, alertState{a.Labels.Copy(), a.Annotations.Copy()})
				}
			}
		}
	}
	if !found {
		return fmt.Errorf("alert %s at %v: no such alerting rule", c.Alertname, c.EvalTime)
	}
	for _, e := range c.ExpAlerts {
		l := map[string]string{labels.AlertName: c.Alertname}
		for k, v := range e.ExpLabels {
			l[k] = v
		}
		want = append(want, alertState{labels.FromMap(l), labels.FromMap(e.ExpAnnotations)})
	}
	slices.SortFunc(got, compareAlerts)
	slices.SortFunc(want, compareAlerts)
	if !slices.EqualFunc(got, want, func(a, b alertState) bool { return compareAlerts(a, b) == 0 }) {
		return fmt.Errorf("alert %s at %v:\n    want %v\n    got  %v", c.Alertname, c.EvalTime, want, got)
	}
	return nil
}

// checkExpr evaluates c.Expr at its eval_time and compares the samples.
func checkExpr(suite *promqltest.LazyLoader, c promqlTestCase) error {
	at := time.Unix(0, 0).UTC().Add(time.Duration(c.EvalTime))
	q, err := suite.QueryEngine().NewInstantQuery(context.Background(), suite.Queryable(), nil, c.Expr, at)
	if err != nil {
		return fmt.Errorf("expr %q: %w", c.Expr, err)
	}
	res := q.Exec(suite.Context())
	if res.Err != nil {
		return fmt.Errorf("expr %q at %v: %w", c.Expr, c.EvalTime, res.Err)
	}
	var got []promql.Sample
	switch v := res.Value.(type) {
	case promql.Vector:
		got = v
	case promql.Scalar:
		got = []promql.Sample{{F: v.V, Metric: labels.EmptyLabels()}}
	default:
		return fmt.Errorf("expr %q: a %s, want a vector or a scalar", c.Expr, res.Value.Type())
	}
	var want []promql.Sample
	p := parser.NewParser(parser.Options{})
	for _, s := range c.ExpSamples {
		l, err := p.ParseMetric(s.Labels)
		if err != nil {
			return fmt.Errorf("expr %q: labels %q: %w", c.Expr, s.Labels, err)
		}
		want = append(want, promql.Sample{F: s.Value, Metric: l})
	}
	bySeries := func(a, b promql.Sample) int { return labels.Compare(a.Metric, b.Metric) }
	slices.SortFunc(got, bySeries)
	slices.SortFunc(want, bySeries)
	if !slices.EqualFunc(got, want, func(a, b promql.Sample) bool {
		return labels.Equal(a.Metric, b.Metric) && (a.F == b.F || math.IsNaN(a.F) && math.IsNaN(b.F)) && a.H == nil
	}) {
		return fmt.Errorf("expr %q at %v:\n    want %v\n    got  %v", c.Expr, c.EvalTime, want, got)
	}
	return nil
}
