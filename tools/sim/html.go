package sim

import (
	"fmt"
	"io"
	"strings"

	"github.com/levee-dev/levee/tools/report"
)

// WriteSVG writes one chart comparing the runs: the offered load, and
// every run's goodput and attempts over time (for a README).
func (r *Report) WriteSVG(w io.Writer) error {
	c := report.Chart{
		Title:  fmt.Sprintf("levee sim %s: goodput and attempts per run", r.Scenario),
		XLabel: "time (s)", YLabel: "requests/s", Width: 720, Height: 300,
	}
	for i, run := range r.Runs {
		s := run.Series
		x0 := s.BucketS / 2
		if i == 0 {
			c.Series = append(c.Series, report.Uniform("offered", x0, s.BucketS, s.Offered))
		}
		c.Series = append(c.Series,
			report.Uniform(run.Name+" goodput", x0, s.BucketS, s.Goodput),
			report.Uniform(run.Name+" attempted", x0, s.BucketS, s.Attempted))
	}
	b, err := report.SVG(c)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WriteHTML writes the report as a self-contained HTML page with SVG
// charts: per run, offered / attempted / goodput / rejected / failed over
// time and every instance's received rate, utilisation, queueing delay,
// in-flight requests and state.
func (r *Report) WriteHTML(w io.Writer) error {
	var tbl strings.Builder
	if err := r.WriteTable(&tbl); err != nil {
		return err
	}
	p := &report.Page{
		Title: fmt.Sprintf("levee sim %s (seed %d)", r.Scenario, r.Seed),
		Intro: r.Description,
		Sections: []report.Section{{
			Title: "Summary",
			Pre:   tbl.String(),
		}},
	}
	for _, run := range r.Runs {
		s := run.Series
		x0 := s.BucketS / 2
		ch := []report.Chart{{
			Title:  run.Name + ": requests",
			XLabel: "time (s)", YLabel: "requests/s",
			Series: []report.Series{
				report.Uniform("offered", x0, s.BucketS, s.Offered),
				report.Uniform("attempted", x0, s.BucketS, s.Attempted),
				report.Uniform("goodput", x0, s.BucketS, s.Goodput),
				report.Uniform("rejected", x0, s.BucketS, s.Rejected),
				report.Uniform("failed", x0, s.BucketS, s.Failed),
				report.Uniform("throttled", x0, s.BucketS, s.Throttled),
			},
		}}
		insts := s.Instances
		if len(insts) > 8 {
			insts = insts[:8]
		}
		recv := report.Chart{Title: run.Name + ": attempts received per instance", XLabel: "time (s)", YLabel: "requests/s"}
		util := report.Chart{Title: run.Name + ": CPU utilisation per instance", XLabel: "time (s)", YLabel: "busy cores / cores", YMin: 0, YMax: 1.15}
		state := report.Chart{Title: run.Name + ": instance state (0 up, 1 warming up, 2 down)", XLabel: "time (s)", YLabel: "state", Step: true, YMin: -0.1, YMax: 2.5, Height: 200}
		infl := report.Chart{Title: run.Name + ": peak in-flight per instance", XLabel: "time (s)", YLabel: "requests"}
		qd := report.Chart{Title: run.Name + ": queueing delay per instance (worst control period)", XLabel: "time (s)", YLabel: "seconds"}
		for _, in := range insts {
			recv.Series = append(recv.Series, report.Uniform(in.Name, x0, s.BucketS, in.ReceivedRPS))
			util.Series = append(util.Series, report.Uniform(in.Name, x0, s.BucketS, in.Utilisation))
			st := make([]float64, len(in.State))
			for i, v := range in.State {
				st[i] = float64(v)
			}
			state.Series = append(state.Series, report.Uniform(in.Name, 0, s.BucketS, st))
			infl.Series = append(infl.Series, report.Uniform(in.Name, x0, s.BucketS, in.Inflight))
			qd.Series = append(qd.Series, report.Uniform(in.Name, x0, s.BucketS, in.QueueDelayS))
		}
		ch = append(ch, recv, util, qd, infl, state)
		text := fmt.Sprintf("protection %s, throttling %v, capacity %.0f/s, %d crashes, %.0f s of outage, %.1f%% of CPU time wasted on work nobody waited for.",
			run.Protection, run.Throttle, run.CapacityRPS, run.Crashes, run.OutageS, 100*run.WastedWorkShare)
		sec := report.Section{Title: "Run " + run.Name, Text: text, Charts: ch}
		if len(run.CrashEvents) > 0 {
			t := &report.Table{Header: []string{"t (s)", "instance", "kind", "why"}}
			for i, c := range run.CrashEvents {
				if i == 20 {
					t.Rows = append(t.Rows, []string{"…", fmt.Sprintf("%d more", len(run.CrashEvents)-i), "", ""})
					break
				}
				t.Rows = append(t.Rows, []string{fmt.Sprintf("%.2f", c.T), c.Instance, c.Kind, c.Cause})
			}
			sec.Table = t
		}
		p.Sections = append(p.Sections, sec)
	}
	return p.WriteHTML(w)
}
