package main

import (
	"io"
	"sort"
	"strings"

	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report/chart"
)

// WriteHTML writes the plan as a self-contained HTML page: the text, the
// goodput and p99 of every step against its offered rate, then the runs
// of the report schema over time.
func writePlanHTML(w io.Writer, r *load.PlanReport) error {
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		return err
	}
	page, err := chart.ReportPage(&r.Report, text.String())
	if err != nil {
		return err
	}
	steps := append([]load.PlanStep(nil), r.Plan.Steps...)
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].OfferedRPS < steps[j].OfferedRPS })
	var x, good, p99 []float64
	for _, s := range steps {
		x = append(x, s.OfferedRPS)
		good = append(good, s.GoodputRPS)
		p99 = append(p99, 1000*s.P99S)
	}
	if len(x) > 0 {
		sec := chart.Section{Title: "Steps", Text: "Every step of the plan, by offered rate.", Charts: []chart.Chart{
			{Title: "Goodput against offered load", XLabel: "offered (requests/s)", YLabel: "requests/s",
				Series: []chart.Series{{Name: "offered", X: x, Y: x}, {Name: "goodput", X: x, Y: good}}},
			{Title: "p99 latency of successes against offered load", XLabel: "offered (requests/s)", YLabel: "ms",
				Series: []chart.Series{{Name: "p99", X: x, Y: p99}}},
		}}
		page.Sections = append(page.Sections[:1], append([]chart.Section{sec}, page.Sections[1:]...)...)
	}
	return page.WriteHTML(w)
}

// WriteHTML writes the drill as a self-contained HTML page: the text, then
// each level's run over time.
func writeDrillHTML(w io.Writer, r *load.DrillReport) error {
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		return err
	}
	return chart.WriteReport(w, &r.Report, text.String())
}
