package sim

import (
	"fmt"
	"io"
	"strings"

	"github.com/levee-dev/levee/tools/report/chart"
)

// WriteSVG writes one chart comparing the runs: the offered load, and
// every run's goodput and attempts over time (for a README).
func (r *Report) WriteSVG(w io.Writer) error {
	c := chart.Chart{
		Title:  fmt.Sprintf("levee sim %s: goodput and attempts per run", r.Scenario),
		XLabel: "time (s)", YLabel: "requests/s", Width: 720, Height: 300,
	}
	for i, run := range r.Runs {
		s := run.Series
		x0 := s.BucketS / 2
		if i == 0 {
			c.Series = append(c.Series, chart.Uniform("offered", x0, s.BucketS, s.OfferedRPS))
		}
		c.Series = append(c.Series,
			chart.Uniform(run.Name+" goodput", x0, s.BucketS, s.GoodputRPS),
			chart.Uniform(run.Name+" attempted", x0, s.BucketS, s.AttemptedRPS))
	}
	b, err := chart.SVG(c)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WriteHTML writes the report as a self-contained HTML page with SVG
// charts (chart.ReportPage): per run, offered / attempted / goodput /
// rejected / failed over time and every instance's received rate,
// utilisation, queueing delay, in-flight requests and state.
func (r *Report) WriteHTML(w io.Writer) error {
	var tbl strings.Builder
	if err := r.WriteTable(&tbl); err != nil {
		return err
	}
	return chart.WriteReport(w, &r.Report, tbl.String())
}
