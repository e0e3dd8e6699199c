package instrument

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

var nameRE = regexp.MustCompile(`^levee_[a-z][a-z0-9_]*[a-z0-9]$`)

// TestTable checks the naming rules every metric follows: Prometheus base
// units and suffixes, a UCUM unit that agrees with the name, and label
// names from the fixed set.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	knownLabels := []string{LabelCriticality, LabelReason, LabelSignal, LabelBackend, LabelKind, LabelResult, LabelStage}
	for _, m := range All() {
		if !nameRE.MatchString(m.Name) {
			t.Errorf("%s: not a levee_ snake_case name", m.Name)
		}
		if seen[m.Name] {
			t.Errorf("%s: listed twice", m.Name)
		}
		seen[m.Name] = true
		if m.Help == "" || strings.HasSuffix(m.Help, " ") {
			t.Errorf("%s: help %q", m.Name, m.Help)
		}
		counter := strings.HasSuffix(m.Name, "_total")
		switch {
		case m.Kind == Counter && !counter:
			t.Errorf("%s: a counter whose name does not end in _total", m.Name)
		case m.Kind == Gauge && counter:
			t.Errorf("%s: a gauge whose name ends in _total", m.Name)
		case m.Kind != Counter && m.Kind != Gauge:
			t.Errorf("%s: kind %d", m.Name, m.Kind)
		}
		base := strings.TrimSuffix(m.Name, "_total")
		wantUnit := map[bool]string{true: "s"}[strings.HasSuffix(base, "_seconds")]
		if strings.HasSuffix(base, "_ratio") {
			wantUnit = "1"
		}
		if strings.HasSuffix(base, "_per_second") {
			wantUnit = unitRate
		}
		if (wantUnit != "" || m.Unit == "s" || m.Unit == "1" || strings.Contains(m.Unit, "/")) && m.Unit != wantUnit {
			t.Errorf("%s: unit %q, want %q from the name", m.Name, m.Unit, wantUnit)
		}
		if m.Unit != "" && m.Unit != "s" && m.Unit != "1" && !regexp.MustCompile(`^\{[a-z/]+\}$`).MatchString(m.Unit) {
			t.Errorf("%s: unit %q: want s, 1 or a {annotation}", m.Name, m.Unit)
		}
		for _, l := range m.Labels {
			if !slices.Contains(knownLabels, l) {
				t.Errorf("%s: label %q", m.Name, l)
			}
		}
	}
	if len(seen) < 45 {
		t.Errorf("All lists %d metrics", len(seen))
	}
}

// reading is one call of an Emit.
type reading struct {
	m  *Metric
	v  float64
	lv []string
}

func collect(read func(Emit)) []reading {
	var out []reading
	read(func(m *Metric, v float64, lv ...string) { out = append(out, reading{m, v, lv}) })
	return out
}

// checkReadings checks that every reading is of a listed metric and gives
// as many label values as its metric has labels, and that every listed
// metric is read.
func checkReadings(t *testing.T, got []reading, listed []*Metric) {
	t.Helper()
	for _, r := range got {
		if !slices.Contains(listed, r.m) {
			t.Errorf("%s: read but not listed", r.m.Name)
		}
		if len(r.lv) != len(r.m.Labels) {
			t.Errorf("%s: %d label values %v for labels %v", r.m.Name, len(r.lv), r.lv, r.m.Labels)
		}
	}
	for _, m := range listed {
		if !slices.ContainsFunc(got, func(r reading) bool { return r.m == m }) {
			t.Errorf("%s: listed but never read", m.Name)
		}
	}
}

func TestReadAdmit(t *testing.T) {
	s := admit.Snapshot{
		Load:          1.25,
		ShedLevel:     2.5,
		AdmitFraction: 0.4,
		Signals: []admit.SignalState{
			{Name: "cpu", Value: 1, Target: 0.8},
			{Name: "queue_delay", Value: math.NaN(), Target: 0.005},
			{Name: "bad", Value: 1, Target: 0},
		},
		RetryAfter: 1500 * time.Millisecond,
		Overloaded: true,
	}
	s.Admitted[levee.Critical] = 7
	s.Rejected[levee.Sheddable][levee.Overloaded] = 3
	got := collect(func(e Emit) { ReadAdmit(s, e) })
	checkReadings(t, got, AdmitMetrics)

	find := func(m *Metric, lv ...string) float64 {
		for _, r := range got {
			if r.m == m && slices.Equal(r.lv, lv) {
				return r.v
			}
		}
		t.Fatalf("%s%v: not read", m.Name, lv)
		return 0
	}
	tests := []struct {
		m    *Metric
		lv   []string
		want float64
	}{
		{Admissions, []string{"CRITICAL"}, 7},
		{Admissions, []string{"SHEDDABLE"}, 0},
		{Rejections, []string{"SHEDDABLE", "overloaded"}, 3},
		{Rejections, []string{"CRITICAL_PLUS", "deadline"}, 0},
		{HeadroomRatio, nil, -0.25},
		{SignalLoadRatio, []string{"cpu"}, 1.25},
		{RetryAfter, nil, 1.5},
		{Overloaded, nil, 1},
		{NoRetry, nil, 0},
	}
	for _, tt := range tests {
		if got := find(tt.m, tt.lv...); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.m.Name, tt.lv, got, tt.want)
		}
	}
	for _, sig := range []string{"queue_delay", "bad"} {
		if got := find(SignalLoadRatio, sig); !math.IsNaN(got) {
			t.Errorf("signal load ratio of %s = %v, want NaN (no reading or no valid target)", sig, got)
		}
	}
	var rejections int
	for _, r := range got {
		if r.m == Rejections {
			rejections++
		}
	}
	if rejections != levee.NumCriticalities*3 {
		t.Errorf("%d rejection readings, want one per criticality and admission reason", rejections)
	}
}

func TestReadBudget(t *testing.T) {
	got := collect(func(e Emit) { ReadBudget(retry.BudgetStats{Requests: 10, Retries: 2, Refused: 1}, e) })
	checkReadings(t, got, BudgetMetrics)
	for i, want := range []float64{10, 2, 1} {
		if got[i].v != want {
			t.Errorf("%s = %v, want %v", got[i].m.Name, got[i].v, want)
		}
	}
}

func TestThrottles(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := throttle.NewGroup()
	g.Get("db")
	g.Get("api")
	api := throttle.New()
	if api.AllowAt(now, levee.Critical) == nil {
		api.DoneAt(now, levee.Critical, true)
	}
	var s Throttles
	s.Add("api", api) // shadows the group's "api"
	s.AddGroup(g)
	s.AddGroup(nil)
	s.Add("gone", throttle.New())
	s.Add("gone", nil)
	got := collect(s.Read)
	checkReadings(t, got, ThrottleMetrics)
	perBackend := map[string]int{}
	for _, r := range got {
		perBackend[r.lv[0]]++
		if r.m == ThrottleRequests && r.lv[0] == "api" && r.lv[1] == "CRITICAL" && r.v != 1 {
			t.Errorf("api CRITICAL requests = %v, want 1 (the throttle added by name, not the group's)", r.v)
		}
	}
	want := len(ThrottleMetrics) * levee.NumCriticalities
	if len(perBackend) != 2 || perBackend["api"] != want || perBackend["db"] != want {
		t.Errorf("readings per backend %v, want api and db with %d each", perBackend, want)
	}
	var empty Throttles
	if got := collect(empty.Read); len(got) != 0 {
		t.Errorf("empty set read %d readings", len(got))
	}
}

func TestEvents(t *testing.T) {
	var c Events
	for _, k := range []admit.EventKind{admit.OverloadStart, admit.OverloadStart, admit.DrillEnd, 0, 31, 200} {
		c.Observe(admit.Event{Kind: k})
	}
	if got := c.Count(admit.OverloadStart); got != 2 {
		t.Errorf("Count(overload_start) = %d, want 2", got)
	}
	if got := c.Count(200); got != 0 {
		t.Errorf("Count(200) = %d, want 0", got)
	}
	got := collect(c.Read)
	checkReadings(t, got, []*Metric{StateChanges})
	for _, r := range got {
		if r.lv[0] == "unknown" {
			t.Errorf("read a kind admit does not name")
		}
	}
	if allocs := testing.AllocsPerRun(100, func() { c.Observe(admit.Event{Kind: admit.DrillStart}) }); allocs != 0 {
		t.Errorf("Observe: %v allocs, want 0", allocs)
	}
}

func TestReadServer(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := collect(func(e Emit) {
		ReadConfig(Reloads{Generation: 3, Applied: 2, Rejected: 1, Unchanged: 4, Changes: 5, AppliedAt: at, LastOK: true, Overrides: 1}, e)
		ReadAdmin(6, 7, e)
		ReadProbes(8, e)
		ReadConnsGone(9, e)
	})
	checkReadings(t, got, slices.Concat(ConfigMetrics, AdminMetrics, []*Metric{HealthProbes, ConnsGone}))
	want := map[string]float64{
		"levee_config_reloads_total[applied]":      2,
		"levee_config_reloads_total[rejected]":     1,
		"levee_config_reloads_total[unchanged]":    4,
		"levee_config_changes_total[]":             5,
		"levee_config_generation[]":                3,
		"levee_config_last_reload_success[]":       1,
		"levee_config_applied_timestamp_seconds[]": float64(at.Unix()),
		"levee_config_overrides[]":                 1,
		"levee_admin_unauthorized_total[]":         6,
		"levee_admin_changes_total[]":              7,
		"levee_health_probes_total[]":              8,
		"levee_connections_gone_total[]":           9,
	}
	for _, r := range got {
		k := r.m.Name + "[" + strings.Join(r.lv, ",") + "]"
		if w, ok := want[k]; !ok || r.v != w {
			t.Errorf("%s = %v, want %v (listed %v)", k, r.v, w, ok)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d readings, want %d", len(got), len(want))
	}
}
