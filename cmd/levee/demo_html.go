package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loadgen"
	"github.com/levee-dev/levee/tools/report"
)

// chartStep is the width of a point on the demo's charts.
const chartStep = 200 * time.Millisecond

// rates sums a 100ms series into chartStep buckets, shifted by shift
// buckets, and returns events per second.
func rates(xs []int64, res time.Duration, shift int) []float64 {
	per := int(chartStep / res)
	if per < 1 {
		per = 1
	}
	var out []float64
	for i := 0; i < len(xs)-shift; i += per {
		var n int64
		for k := i; k < i+per && k+shift < len(xs); k++ {
			if k+shift >= 0 {
				n += xs[k+shift]
			}
		}
		out = append(out, float64(n)/chartStep.Seconds())
	}
	return out
}

func loadSeries(r *loadgen.Report, f func(loadgen.Bucket) int64) []float64 {
	xs := make([]int64, len(r.Series))
	for i, b := range r.Series {
		xs[i] = f(b)
	}
	return rates(xs, r.Resolution, 0)
}

// trim cuts ys to at most n points.
func trim(ys []float64, n int) []float64 {
	if len(ys) > n {
		return ys[:n]
	}
	return ys
}

func writeDemoHTML(path string, out demoJSON, work time.Duration, table string) error {
	page := report.Page{
		Title: "levee demo: a real overload on loopback",
		Intro: fmt.Sprintf("A CPU-bound HTTP backend (GOMAXPROCS=1, pinned to one CPU, %v of CPU per request, capacity %.0f req/s measured closed-loop) "+
			"driven open-loop from a second process on the other CPU: normal %.1f× → spike %.1f× → after %.1f× of capacity. "+
			"Unprotected: naive clients (%v per attempt, %d immediate retries, no budget, no throttling), no shedding on the server. "+
			"levee: leveehttp.NewHandler with admit and the default pressure signals, clients through leveehttp.NewTransport, all defaults. "+
			"Latency is measured from each request's scheduled time.",
			work, out.CapacityRPS, normalX, spikeX, afterX, naiveTimeout, naiveRetries),
	}
	page.Sections = append(page.Sections, report.Section{Title: "Summary", Pre: table})
	// One section per repetition: the unprotected run and the levee run
	// side by side.
	byRep := map[string][]demoRun{}
	var order []string
	for _, r := range out.Runs {
		rep := r.Name[strings.LastIndexByte(r.Name, '-')+1:]
		if _, ok := byRep[rep]; !ok {
			order = append(order, rep)
		}
		byRep[rep] = append(byRep[rep], r)
	}
	for _, rep := range order {
		runs := byRep[rep]
		var good, att, served, late, shed []report.Series
		var offered []float64
		for _, r := range runs {
			lr := r.res.Load
			label := "unprotected"
			if r.Protection == backend.Levee {
				label = "levee"
			}
			if offered == nil {
				offered = loadSeries(lr, func(b loadgen.Bucket) int64 { return b.Offered })
				good = append(good, report.Uniform("offered", 0, chartStep.Seconds(), offered))
			}
			good = append(good, report.Uniform(label+" goodput", 0, chartStep.Seconds(), loadSeries(lr, func(b loadgen.Bucket) int64 { return b.Goodput })))
			att = append(att, report.Uniform(label+" attempts", 0, chartStep.Seconds(), loadSeries(lr, func(b loadgen.Bucket) int64 { return b.Attempted })))
			ss := r.res.Server.Series
			shift := 0
			if ss.Resolution > 0 {
				shift = int(lr.Start.Sub(ss.Start) / ss.Resolution)
			}
			inTime := make([]int64, len(ss.OK))
			for i := range ss.OK {
				inTime[i] = ss.OK[i] - ss.OKLate[i]
			}
			served = append(served, report.Uniform(label+" answered in time", 0, chartStep.Seconds(), trim(rates(inTime, ss.Resolution, shift), len(offered))))
			late = append(late, report.Uniform(label+" runs after deadline", 0, chartStep.Seconds(), trim(rates(ss.Late, ss.Resolution, shift), len(offered))))
			if r.Protection == backend.Levee && len(r.res.Server.ShedLevel) > 0 {
				lv := r.res.Server.ShedLevel
				if shift > 0 && shift < len(lv) {
					lv = lv[shift:]
				}
				lv = lv[:min(len(lv), int(float64(len(offered))*chartStep.Seconds()/0.1))]
				shed = append(shed, report.Uniform("shed level", 0, 0.1, lv))
			}
		}
		// The offered load first everywhere, so that each protection keeps
		// its colour from chart to chart.
		ref := []report.Series{report.Uniform("offered", 0, chartStep.Seconds(), offered)}
		att = append(ref, att...)
		served = append(ref, served...)
		late = append(ref, late...)
		charts := []report.Chart{
			{Title: "Goodput (by scheduled time)", XLabel: "seconds", YLabel: "requests/s", Series: good},
			{Title: "Attempts on the wire (retries included)", XLabel: "seconds", YLabel: "attempts/s", Series: att},
			{Title: "Backend: 2xx answered before the client's deadline", XLabel: "seconds", YLabel: "responses/s", Series: served},
			{Title: "Backend: handler runs finishing after their client gave up", XLabel: "seconds", YLabel: "runs/s", Series: late},
		}
		if len(shed) > 0 {
			charts = append(charts, report.Chart{Title: "levee shed level (0 nothing … 4 everything)", XLabel: "seconds", YLabel: "level", Series: shed, Step: true})
		}
		page.Sections = append(page.Sections, report.Section{
			Title:  "Repetition " + rep,
			Text:   fmt.Sprintf("x axis: seconds from the start of the run; %s.", phaseEnds(runs)),
			Charts: charts,
		})
	}
	var buf bytes.Buffer
	if err := page.WriteHTML(&buf); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

func phaseEnds(runs []demoRun) string {
	if len(runs) == 0 {
		return "?"
	}
	var parts []string
	for _, p := range runs[0].res.Load.Phases {
		parts = append(parts, fmt.Sprintf("%s %.0f–%.0f s", p.Name, p.Offset.Seconds(), (p.Offset+p.Duration).Seconds()))
	}
	return strings.Join(parts, ", ")
}
