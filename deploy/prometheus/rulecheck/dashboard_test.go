package rulecheck

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"testing"
)

const dashboardFile = "../../grafana/levee.json"

// dashboard is the part of Grafana's dashboard JSON model the checks read.
type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"` // a string, or {"query": …} for a query variable
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name string `json:"name"`
			Expr string `json:"expr"`
		} `json:"list"`
	} `json:"annotations"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource *struct{}  `json:"datasource"`
	GridPos    gridPos    `json:"gridPos"`
	Targets    []target   `json:"targets"`
	Panels     []panel    `json:"panels"` // a collapsed row's panels
	Options    *struct{}  `json:"options"`
	FieldCfg   *fieldConf `json:"fieldConfig"`
}

type gridPos struct{ H, W, X, Y int }

type target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

type fieldConf struct {
	Defaults struct {
		Unit string `json:"unit"`
	} `json:"defaults"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// grafanaVars are the template variables a query may use, replaced by
// values PromQL parses: ranges for Grafana's built-in intervals, a regexp
// for the dashboard's own variables (used in =~ matchers).
var grafanaVars = regexp.MustCompile(`\$(__rate_interval|__interval|__range|\{?[a-z_]+\}?)`)

func expand(expr string) string {
	return grafanaVars.ReplaceAllStringFunc(expr, func(v string) string {
		switch v {
		case "$__rate_interval", "$__interval":
			return "5m"
		case "$__range":
			return "1h"
		}
		return ".+"
	})
}

// labelValuesRE reads Grafana's label_values(selector, label) variable
// query.
var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// TestDashboardQueries parses every query of the dashboard (panel targets,
// annotations, template variables) with Prometheus's parser and requires
// each to select only metrics levee exports, with labels they have and
// values that match.
func TestDashboardQueries(t *testing.T) {
	d := readDashboard(t)
	exp := exported(t)
	used := map[string]bool{}
	check := func(where, expr string) {
		names, err := checkSelectors(expand(expr), exp, nil)
		if err != nil {
			t.Errorf("%s: %q: %v", where, expr, err)
			return
		}
		if len(names) == 0 {
			t.Errorf("%s: %q selects no metric levee exports", where, expr)
		}
		for _, n := range names {
			used[n] = true
		}
	}
	n := 0
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			for _, tg := range p.Targets {
				n++
				check(fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), tg.Expr)
			}
		}
	}
	walk(d.Panels)
	for _, a := range d.Annotations.List {
		check("annotation "+a.Name, a.Expr)
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValuesRE.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		check("variable "+v.Name, m[1])
		if !slices.Contains(targetLabels, m[2]) {
			t.Errorf("variable %s: label %q, want a target label %v", v.Name, m[2], targetLabels)
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil || q.Query != v.Definition {
			t.Errorf("variable %s: query %s (%v) differs from its definition %q", v.Name, v.Query, err, v.Definition)
		}
	}
	if n < 20 {
		t.Errorf("%d queries: the dashboard is missing panels", n)
	}
	// Every family levee exports is on the dashboard.
	for name := range exp {
		if !used[name] {
			t.Errorf("%s: exported but on no panel", name)
		}
	}
}

// TestDashboardLayout checks what Grafana needs to show the dashboard: a
// title and uid, unique panel ids, every panel on the 24-column grid
// without overlaps, every data panel with a data source and queries.
func TestDashboardLayout(t *testing.T) {
	d := readDashboard(t)
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q uid %q: want both", d.Title, d.UID)
	}
	ids := map[int]bool{}
	var boxes []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if ids[p.ID] || p.ID == 0 {
				t.Errorf("panel %q: id %d missing or repeated", p.Title, p.ID)
			}
			ids[p.ID] = true
			g := p.GridPos
			if g.W <= 0 || g.H <= 0 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, g)
			}
			for _, b := range boxes {
				o := b.GridPos
				if g.X < o.X+o.W && o.X < g.X+g.W && g.Y < o.Y+o.H && o.Y < g.Y+g.H {
					t.Errorf("panel %q overlaps panel %q", p.Title, b.Title)
				}
			}
			boxes = append(boxes, p)
			if p.Type == "row" {
				continue
			}
			if p.Title == "" || p.Datasource == nil || len(p.Targets) == 0 || p.Options == nil || p.FieldCfg == nil {
				t.Errorf("panel %d %q: want a title, a datasource, targets, options and fieldConfig", p.ID, p.Title)
			}
			if !slices.Contains([]string{"timeseries", "stat"}, p.Type) {
				t.Errorf("panel %q: type %q", p.Title, p.Type)
			}
			refs := map[string]bool{}
			for _, tg := range p.Targets {
				if tg.RefID == "" || refs[tg.RefID] {
					t.Errorf("panel %q: refId %q missing or repeated", p.Title, tg.RefID)
				}
				refs[tg.RefID] = true
			}
		}
	}
	walk(d.Panels)
	// The panels the dashboard is for.
	for _, want := range []string{
		"Load vs target, per signal", "Shed level and admit ratio", "Admitted by criticality",
		"Rejected by criticality, reason and stage", "Capacity vs offered", "Degradation",
		"Retry share and no-retry", "Run queue", "Client throttle: local rejections",
		"Client throttle: reject probability", "Retry budget",
	} {
		if !slices.ContainsFunc(boxes, func(p panel) bool { return p.Title == want }) {
			t.Errorf("no panel %q", want)
		}
	}
}

func TestExpand(t *testing.T) {
	for in, want := range map[string]string{
		`rate(x{instance=~"$instance"}[$__rate_interval])`: `rate(x{instance=~".+"}[5m])`,
		`x{job=~"${job}"}`:      `x{job=~".+"}`,
		`increase(x[$__range])`: `increase(x[1h])`,
	} {
		if got := expand(in); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
