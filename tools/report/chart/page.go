package chart

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/levee-dev/levee/tools/report"
)

// maxInstanceLines bounds the instances drawn on one chart.
const maxInstanceLines = 8

// ReportPage lays out r as a Page: a summary (summary, or r's text tables
// when summary is empty), then per run the requests over time, the p99
// latency when measured, and each per-instance series the tool filled in.
func ReportPage(r *report.Report, summary string) (*Page, error) {
	if summary == "" {
		var b strings.Builder
		if err := r.WriteText(&b); err != nil {
			return nil, err
		}
		summary = b.String()
	}
	title := "levee " + r.Tool
	if r.Scenario != "" {
		title += " " + r.Scenario
	}
	if r.Seed != nil {
		title += fmt.Sprintf(" (seed %d)", *r.Seed)
	}
	p := &Page{Title: title, Intro: r.Description, Sections: []Section{{Title: "Summary", Pre: summary}}}
	for _, run := range r.Runs {
		p.Sections = append(p.Sections, runSection(run))
	}
	return p, nil
}

// WriteReport writes ReportPage(r, summary) as HTML.
func WriteReport(w io.Writer, r *report.Report, summary string) error {
	p, err := ReportPage(r, summary)
	if err != nil {
		return err
	}
	return p.WriteHTML(w)
}

// distribution charts each phase's latency distribution, x in nines
// (1 = the 90th percentile, 2 = the 99th, …; the maximum at 5).
func distribution(run report.Run) (Chart, bool) {
	c := Chart{Title: run.Name + ": latency of successes by percentile, per phase", XLabel: "nines (1 = p90, 2 = p99, 3 = p99.9; max at 5)", YLabel: "seconds"}
	for i, p := range run.Phases {
		if i == maxInstanceLines || len(p.Latency.Quantiles) == 0 {
			continue
		}
		var x, y []float64
		for _, q := range p.Latency.Quantiles {
			nines := 5.0
			if q.Q < 1 {
				nines = min(5, -math.Log10(1-q.Q))
			}
			x, y = append(x, nines), append(y, q.S)
		}
		c.Series = append(c.Series, Series{Name: p.Name, X: x, Y: y})
	}
	return c, len(c.Series) > 0
}

func runSection(run report.Run) Section {
	s := run.Series
	x0 := s.BucketS / 2
	u := func(name string, y []float64) Series { return Uniform(name, x0, s.BucketS, y) }
	charts := []Chart{{
		Title:  run.Name + ": requests",
		XLabel: "time (s)", YLabel: "requests/s",
		Series: []Series{
			u("offered", s.OfferedRPS), u("attempted", s.AttemptedRPS), u("goodput", s.GoodputRPS),
			u("rejected", s.RejectedRPS), u("failed", s.FailedRPS), u("throttled", s.ThrottledRPS),
		},
	}}
	if len(s.P99S) > 0 {
		charts = append(charts, Chart{Title: run.Name + ": p99 latency of successes (from the scheduled time)",
			XLabel: "time (s)", YLabel: "seconds", Series: []Series{u("p99", s.P99S)}})
	}
	if c, ok := distribution(run); ok {
		charts = append(charts, c)
	}
	insts := s.Instances
	if len(insts) > maxInstanceLines {
		insts = insts[:maxInstanceLines]
	}
	type perInst struct {
		chart Chart
		get   func(report.InstanceSeries) []float64
		x0    float64
	}
	specs := []perInst{
		{Chart{Title: run.Name + ": attempts received per instance", YLabel: "requests/s"}, func(i report.InstanceSeries) []float64 { return i.ReceivedRPS }, x0},
		{Chart{Title: run.Name + ": answered successfully per instance", YLabel: "requests/s"}, func(i report.InstanceSeries) []float64 { return i.ServedRPS }, x0},
		{Chart{Title: run.Name + ": handler runs finishing after their client had gone", YLabel: "runs/s"}, func(i report.InstanceSeries) []float64 { return i.WastedRPS }, x0},
		{Chart{Title: run.Name + ": CPU utilisation per instance", YLabel: "busy cores / cores", YMin: 0, YMax: 1.15}, func(i report.InstanceSeries) []float64 { return i.Utilisation }, x0},
		{Chart{Title: run.Name + ": queueing delay per instance (worst control period)", YLabel: "seconds"}, func(i report.InstanceSeries) []float64 { return i.QueueDelayS }, x0},
		{Chart{Title: run.Name + ": peak in-flight per instance", YLabel: "requests"}, func(i report.InstanceSeries) []float64 { return i.Inflight }, x0},
		{Chart{Title: run.Name + ": levee shed level (0 nothing … 4 everything)", YLabel: "level", Step: true}, func(i report.InstanceSeries) []float64 { return i.ShedLevel }, 0},
		{Chart{Title: run.Name + ": instance state (0 up, 1 warming up, 2 down)", YLabel: "state", Step: true, YMin: -0.1, YMax: 2.5, Height: 200}, func(i report.InstanceSeries) []float64 {
			st := make([]float64, len(i.State))
			for k, v := range i.State {
				st[k] = float64(v)
			}
			return st
		}, 0},
	}
	for _, sp := range specs {
		c := sp.chart
		c.XLabel = "time (s)"
		for _, in := range insts {
			if y := sp.get(in); len(y) > 0 {
				c.Series = append(c.Series, Uniform(in.Name, sp.x0, s.BucketS, y))
			}
		}
		if len(c.Series) > 0 {
			charts = append(charts, c)
		}
	}
	text := fmt.Sprintf("protection %s", run.Protection)
	if run.Client != "" {
		text += ", client " + run.Client
	}
	if run.Throttle {
		text += ", clients throttle adaptively"
	}
	if run.CapacityRPS > 0 {
		text += fmt.Sprintf(", capacity %.0f/s", run.CapacityRPS)
	}
	text += fmt.Sprintf(", %d crashes, %.0f s of outage, %.1f%% of the servers' work wasted on callers that had gone.",
		run.Crashes, run.OutageS, 100*run.WastedWorkShare)
	sec := Section{Title: "Run " + run.Name, Text: text, Charts: charts}
	if len(run.CrashEvents) > 0 {
		t := &Table{Header: []string{"t (s)", "instance", "kind", "why"}}
		for i, c := range run.CrashEvents {
			if i == 20 {
				t.Rows = append(t.Rows, []string{"…", fmt.Sprintf("%d more", len(run.CrashEvents)-i), "", ""})
				break
			}
			t.Rows = append(t.Rows, []string{fmt.Sprintf("%.2f", c.T), c.Instance, c.Kind, c.Cause})
		}
		sec.Table = t
	}
	return sec
}
