package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/report"
	"github.com/levee-dev/levee/tools/report/chart"
)

// chartStep is the width of a point on the demo's charts, seconds.
const chartStep = 0.2

// resample averages rates (one per bucket of bucketS seconds) over
// chartStep-wide points.
func resample(rates []float64, bucketS float64) []float64 {
	per := max(1, int(chartStep/bucketS+0.5))
	var out []float64
	for i := 0; i < len(rates); i += per {
		var s float64
		n := 0
		for k := i; k < i+per && k < len(rates); k++ {
			s += rates[k]
			n++
		}
		out = append(out, s/float64(per))
	}
	return out
}

// writeDemoHTML draws the demo's report: the summary table, then for each
// repetition the unprotected run and the levee run side by side.
func writeDemoHTML(path string, rep *report.Report, runs []demoRun, table string) error {
	page := chart.Page{Title: "levee demo: a real overload on loopback", Intro: rep.Description}
	page.Sections = append(page.Sections, chart.Section{Title: "Summary", Pre: table})
	byRep := map[string][]demoRun{}
	var order []string
	for _, r := range runs {
		n := r.Name[strings.LastIndexByte(r.Name, '-')+1:]
		if _, ok := byRep[n]; !ok {
			order = append(order, n)
		}
		byRep[n] = append(byRep[n], r)
	}
	for _, n := range order {
		page.Sections = append(page.Sections, repetition(n, byRep[n]))
	}
	var buf bytes.Buffer
	if err := page.WriteHTML(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func repetition(n string, runs []demoRun) chart.Section {
	var good, att, served, late, shed []chart.Series
	var offered []float64
	for _, r := range runs {
		s := r.Series
		u := func(name string, rates []float64) chart.Series {
			return chart.Uniform(name, 0, chartStep, resample(rates, s.BucketS))
		}
		label := "unprotected"
		if r.Protection == backend.Levee {
			label = "levee"
		}
		if offered == nil {
			offered = resample(s.OfferedRPS, s.BucketS)
		}
		good = append(good, u(label+" goodput", s.GoodputRPS))
		att = append(att, u(label+" attempts", s.AttemptedRPS))
		if len(s.Instances) > 0 {
			in := s.Instances[0]
			served = append(served, u(label+" answered in time", in.ServedRPS))
			late = append(late, u(label+" runs after deadline", in.WastedRPS))
			if len(in.ShedLevel) > 0 {
				shed = append(shed, chart.Uniform(label+" shed level", 0, s.BucketS, in.ShedLevel))
			}
		}
	}
	// The offered load first everywhere, so that each protection keeps its
	// colour from chart to chart.
	ref := chart.Uniform("offered", 0, chartStep, offered)
	charts := []chart.Chart{
		{Title: "Goodput (by scheduled time)", XLabel: "seconds", YLabel: "requests/s", Series: append([]chart.Series{ref}, good...)},
		{Title: "Attempts on the wire (retries included)", XLabel: "seconds", YLabel: "attempts/s", Series: append([]chart.Series{ref}, att...)},
	}
	if len(served) > 0 {
		charts = append(charts,
			chart.Chart{Title: "Backend: 2xx answered before the client's deadline", XLabel: "seconds", YLabel: "responses/s", Series: append([]chart.Series{ref}, served...)},
			chart.Chart{Title: "Backend: handler runs finishing after their client gave up", XLabel: "seconds", YLabel: "runs/s", Series: append([]chart.Series{ref}, late...)})
	}
	if len(shed) > 0 {
		charts = append(charts, chart.Chart{Title: "levee shed level (0 nothing … 4 everything)", XLabel: "seconds", YLabel: "level", Series: shed, Step: true})
	}
	return chart.Section{
		Title:  "Repetition " + n,
		Text:   fmt.Sprintf("x axis: seconds from the start of the run; %s.", phaseEnds(runs)),
		Charts: charts,
	}
}

func phaseEnds(runs []demoRun) string {
	if len(runs) == 0 {
		return "?"
	}
	var parts []string
	for _, p := range runs[0].Phases {
		parts = append(parts, fmt.Sprintf("%s %.0f–%.0f s", p.Name, p.StartS, p.EndS))
	}
	return strings.Join(parts, ", ")
}
