package leveeprom

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

const alertsFile = "../deploy/prometheus/levee-alerts.yml"

// ruleFile is the Prometheus rules file format (the parts levee uses).
type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// exported returns every metric leveeprom exports with its label names.
func exported(t *testing.T) map[string][]string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	snap := admit.Snapshot{Signals: []admit.SignalState{{Name: "cpu", Value: 0.5, Target: 0.8}}}
	tc := NewThrottleCollector()
	tc.Add("api", throttle.New())
	reg.MustRegister(
		newAdmitCollector(func() admit.Snapshot { return snap }, nil),
		tc,
		NewBudgetCollector(retry.NewBudget()),
		NewEventCollector(),
	)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, mf := range mfs {
		var labels []string
		for _, lp := range mf.GetMetric()[0].GetLabel() {
			labels = append(labels, lp.GetName())
		}
		out[mf.GetName()] = labels
	}
	return out
}

func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	metrics := exported(t)
	if len(rf.Groups) == 0 {
		t.Fatal("no rule groups")
	}
	names := map[string]bool{}
	used := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: needs a name and rules", g.Name)
		}
		for _, r := range g.Rules {
			where := g.Name + "/" + r.Alert
			if !regexp.MustCompile(`^Levee[A-Z][A-Za-z]+$`).MatchString(r.Alert) || r.Record != "" {
				t.Errorf("%s: want an alert named LeveeCamelCase and no record", where)
			}
			if names[r.Alert] {
				t.Errorf("%s: duplicate alert name", where)
			}
			names[r.Alert] = true
			if _, err := model.ParseDuration(r.For); err != nil {
				t.Errorf("%s: for %q: %v", where, r.For, err)
			}
			if s := r.Labels["severity"]; s != "page" && s != "ticket" {
				t.Errorf("%s: severity %q, want page or ticket", where, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			for k, text := range r.Annotations {
				if err := checkTemplate(text); err != nil {
					t.Errorf("%s: annotation %s: %v", where, k, err)
				}
			}
			refs, err := checkExpr(r.Expr, metrics)
			if err != nil {
				t.Errorf("%s: expr %q: %v", where, r.Expr, err)
			}
			for _, m := range refs {
				used[m] = true
			}
		}
	}
	// The rules the issue asks for are there.
	for _, want := range []string{"levee_headroom_ratio", "levee_shedding_seconds_total", "levee_degradation_level"} {
		if !used[want] {
			t.Errorf("no rule uses %s", want)
		}
	}
}

// checkTemplate parses an annotation as Prometheus does (Go text/template
// with Prometheus's functions, stubbed here).
func checkTemplate(text string) error {
	stub := func(args ...any) any { return "" }
	funcs := template.FuncMap{}
	for _, f := range []string{"humanize", "humanize1024", "humanizeDuration", "humanizePercentage",
		"humanizeTimestamp", "query", "first", "value", "label", "title", "toUpper", "toLower", "match",
		"reReplaceAll", "graphLink", "tableLink", "args", "safeHtml", "sortByLabel", "strvalue", "externalURL", "pathPrefix"} {
		funcs[f] = stub
	}
	_, err := template.New("a").Funcs(funcs).Parse("{{$labels := .Labels}}{{$value := .Value}}{{$externalLabels := .ExternalLabels}}" + text)
	return err
}

// PromQL words a rule may use besides metric names.
var (
	promFuncs = []string{"rate", "irate", "increase", "delta", "deriv", "changes", "resets",
		"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
		"quantile_over_time", "abs", "clamp_min", "clamp_max", "absent", "absent_over_time", "time",
		"sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "group"}
	promAggs     = []string{"sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "group"}
	promKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
	// targetLabels are added by Prometheus to every series.
	targetLabels = []string{"instance", "job"}
)

type token struct {
	kind byte // 'i' identifier, 'n' number or duration, 's' string, 'p' punctuation or operator
	text string
}

var tokenRE = regexp.MustCompile(`^(?:([A-Za-z_:][A-Za-z0-9_:]*)|([0-9]+(?:\.[0-9]+)?(?:[smhdwy]|ms)?)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(==|!=|>=|<=|=~|!~|[-+*/%^<>=(){}\[\],]))`)

func tokenize(expr string) ([]token, error) {
	var out []token
	s := strings.TrimSpace(expr)
	for s != "" {
		m := tokenRE.FindStringSubmatch(s)
		if m == nil {
			return nil, fmt.Errorf("cannot read %q", s)
		}
		switch {
		case m[1] != "":
			out = append(out, token{'i', m[1]})
		case m[2] != "":
			out = append(out, token{'n', m[2]})
		case m[3] != "":
			out = append(out, token{'s', m[3][1 : len(m[3])-1]})
		default:
			out = append(out, token{'p', m[4]})
		}
		s = strings.TrimSpace(s[len(m[0]):])
	}
	return out, nil
}

// checkExpr is a careful structural check of a PromQL expression (the full
// PromQL parser lives in a module too heavy to depend on): brackets balance;
// every identifier is a known function, aggregation, keyword or a metric
// leveeprom exports; label matchers and by/without lists name labels those
// metrics have; criticality and reason values are valid; range selectors
// hold valid durations. It returns the metrics referenced.
func checkExpr(expr string, metrics map[string][]string) ([]string, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, fmt.Errorf("empty")
	}
	if err := checkOperators(toks); err != nil {
		return nil, err
	}
	var refs []string
	var grouping []string // labels named in by/without/on/ignoring
	var stack []string
	closing := map[string]string{")": "(", "]": "[", "}": "{"}
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		next := token{}
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch tk.kind {
		case 'p':
			switch tk.text {
			case "(", "[", "{":
				stack = append(stack, tk.text)
			case ")", "]", "}":
				if len(stack) == 0 || stack[len(stack)-1] != closing[tk.text] {
					return nil, fmt.Errorf("unbalanced %q", tk.text)
				}
				stack = stack[:len(stack)-1]
			}
		case 'i':
			switch {
			case slices.Contains(promKeywords, tk.text) && slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, tk.text):
				if next.text != "(" {
					if tk.text == "group_left" || tk.text == "group_right" {
						continue
					}
					return nil, fmt.Errorf("%s without a label list", tk.text)
				}
				j := i + 2
				for ; j < len(toks) && toks[j].text != ")"; j++ {
					if toks[j].kind == 'i' {
						grouping = append(grouping, toks[j].text)
					} else if toks[j].text != "," {
						return nil, fmt.Errorf("bad label list after %s", tk.text)
					}
				}
				if j == len(toks) {
					return nil, fmt.Errorf("unclosed label list after %s", tk.text)
				}
				i = j
			case slices.Contains(promKeywords, tk.text):
			case slices.Contains(promAggs, tk.text) && (next.text == "by" || next.text == "without"):
				// the aggregation's grouping is read at the next token
			case next.text == "(":
				if !slices.Contains(promFuncs, tk.text) {
					return nil, fmt.Errorf("unknown function %s", tk.text)
				}
			default:
				labels, ok := metrics[tk.text]
				if !ok {
					return nil, fmt.Errorf("%s is not a metric leveeprom exports", tk.text)
				}
				refs = append(refs, tk.text)
				if next.text == "{" {
					j, err := checkMatchers(toks, i+2, tk.text, labels)
					if err != nil {
						return nil, err
					}
					i = j // the closing brace
				}
				if i+1 < len(toks) && toks[i+1].text == "[" {
					if i+3 >= len(toks) || toks[i+2].kind != 'n' || toks[i+3].text != "]" {
						return nil, fmt.Errorf("bad range selector after %s", tk.text)
					}
					if _, err := model.ParseDuration(toks[i+2].text); err != nil {
						return nil, fmt.Errorf("range of %s: %v", tk.text, err)
					}
					i += 3
				}
			}
		case 's':
			return nil, fmt.Errorf("string %q outside a label matcher", tk.text)
		}
	}
	if len(stack) != 0 {
		return nil, fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("references no leveeprom metric")
	}
	for _, l := range grouping {
		found := slices.Contains(targetLabels, l)
		for _, m := range refs {
			found = found || slices.Contains(metrics[m], l)
		}
		if !found {
			return nil, fmt.Errorf("groups by label %q that none of %v has", l, refs)
		}
	}
	return refs, nil
}

// binaryOps may only stand between two operands; + and - may also be unary.
var binaryOps = []string{"==", "!=", ">=", "<=", "<", ">", "*", "/", "%", "^", "and", "or", "unless", "+", "-"}

// checkOperators rejects a binary operator at either end of the expression
// or of a parenthesis, or right after another one (unary + and - aside).
func checkOperators(toks []token) error {
	isOp := func(tk token) bool { return slices.Contains(binaryOps, tk.text) && tk.kind != 's' }
	unary := func(tk token) bool { return tk.text == "+" || tk.text == "-" }
	depth := 0
	for i, tk := range toks {
		if tk.text == "{" {
			depth++
		}
		if tk.text == "}" {
			depth--
		}
		if depth > 0 || !isOp(tk) {
			continue
		}
		switch {
		case i == len(toks)-1:
			return fmt.Errorf("expression ends with operator %q", tk.text)
		case i == 0 || toks[i-1].text == "(" || toks[i-1].text == ",":
			if !unary(tk) {
				return fmt.Errorf("operator %q without a left operand", tk.text)
			}
		case isOp(toks[i-1]) || toks[i-1].text == "bool":
			if !unary(tk) {
				return fmt.Errorf("operator %q right after %q", tk.text, toks[i-1].text)
			}
		}
		if toks[i+1].text == ")" {
			return fmt.Errorf("operator %q without a right operand", tk.text)
		}
	}
	return nil
}

// checkMatchers checks `label op "value", ...}` from toks[i]; it returns the
// index of the closing brace.
func checkMatchers(toks []token, i int, metric string, labels []string) (int, error) {
	for ; i < len(toks); i++ {
		if toks[i].text == "}" {
			return i, nil
		}
		if toks[i].text == "," {
			continue
		}
		if i+2 >= len(toks) || toks[i].kind != 'i' || toks[i+2].kind != 's' {
			return 0, fmt.Errorf("bad matcher in %s{…}", metric)
		}
		name, op, val := toks[i].text, toks[i+1].text, toks[i+2].text
		if !slices.Contains(labels, name) && !slices.Contains(targetLabels, name) {
			return 0, fmt.Errorf("%s has no label %q", metric, name)
		}
		vals := []string{val}
		switch op {
		case "=", "!=":
		case "=~", "!~":
			if _, err := regexp.Compile("^(?:" + val + ")$"); err != nil {
				return 0, fmt.Errorf("%s{%s%s%q}: %v", metric, name, op, val, err)
			}
			vals = strings.Split(val, "|")
		default:
			return 0, fmt.Errorf("bad matcher operator %q", op)
		}
		for _, v := range vals {
			switch name {
			case "criticality":
				if c, err := levee.ParseCriticality(v); err != nil || c.String() != v {
					return 0, fmt.Errorf("%s: criticality %q is not a wire name", metric, v)
				}
			case "reason":
				if _, ok := levee.ParseReason(v); !ok {
					return 0, fmt.Errorf("%s: reason %q is not a reason", metric, v)
				}
			}
		}
		i += 2
	}
	return 0, fmt.Errorf("unclosed matchers of %s", metric)
}

func TestCheckExpr(t *testing.T) {
	metrics := map[string][]string{
		"levee_rejections_total": {"criticality", "reason"},
		"levee_headroom_ratio":   nil,
	}
	tests := []struct {
		expr    string
		wantErr string
	}{
		{`levee_headroom_ratio < 0.2`, ""},
		{`sum without (criticality, reason) (rate(levee_rejections_total{criticality=~"CRITICAL|CRITICAL_PLUS", reason="overloaded"}[5m])) > 0`, ""},
		{`sum by (instance) (rate(levee_rejections_total[5m]))`, ""},
		{`levee_headroom < 0.2`, "not a metric"},
		{`rate(levee_rejections_total[5q])`, "bad range"},
		{`levee_rejections_total{tenant="a"}`, "no label"},
		{`levee_rejections_total{criticality="critical"}`, "not a wire name"},
		{`levee_rejections_total{reason="busy"}`, "not a reason"},
		{`sum by (tenant) (levee_rejections_total)`, "groups by label"},
		{`frobnicate(levee_headroom_ratio)`, "unknown function"},
		{`(levee_headroom_ratio`, "unclosed"},
		{`levee_headroom_ratio)`, "unbalanced"},
		{`1 > 0`, "no leveeprom metric"},
		{`levee_headroom_ratio < "x"`, "string"},
		{`levee_headroom_ratio < < 0.2`, "right after"},
		{`levee_headroom_ratio <`, "ends with"},
		{`> levee_headroom_ratio`, "left operand"},
		{`(levee_headroom_ratio *) > 1`, "right operand"},
		{`levee_headroom_ratio < -0.2`, ""},
		{`levee_headroom_ratio > bool 0.2`, ""},
	}
	for _, tt := range tests {
		_, err := checkExpr(tt.expr, metrics)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("checkExpr(%q) = %v, want nil", tt.expr, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("checkExpr(%q) = %v, want an error containing %q", tt.expr, err, tt.wantErr)
		}
	}
}
