package loadgen

import (
	"time"

	"github.com/levee-dev/levee/tools/report"
)

// Run converts the generator's report into a run of levee's one report
// schema (package report): per phase the rates and the latency
// percentiles, the series over time and the outage. Generator errors count
// as failures there (Run.GeneratorErrors tells them apart). The caller
// names the run and sets its protection, client, capacity and, with
// report.Run.RecoveryAfter, its recovery.
func (r *Report) Run() report.Run {
	run := report.Run{
		GeneratorErrors: r.GenErrors,
		MaxLagS:         report.Round(r.MaxLag.Seconds()),
	}
	for _, p := range r.Phases {
		t := p.Tally
		t.Failed += p.GenErrors
		run.Attempts += t.Attempted
		run.Phases = append(run.Phases, report.Phase{
			Name:   p.Name,
			StartS: report.Round(p.Offset.Seconds()),
			EndS:   report.Round((p.Offset + p.Duration).Seconds()),
			Rates:  t.Rates(p.Duration.Seconds()),
			Latency: report.Latency{
				P50: seconds(p.P50), P90: seconds(p.P90), P99: seconds(p.P99), Max: seconds(p.Max),
			},
		})
	}
	ts := make([]report.Tally, len(r.Series))
	for i, b := range r.Series {
		ts[i] = b.Tally
	}
	run.Series = report.SeriesOf(ts, r.Resolution.Seconds())
	run.OutageS = report.Outage(run.Series)
	return run
}

func seconds(d time.Duration) float64 { return report.RoundSeconds(d.Seconds()) }
