package loopback

import (
	"github.com/levee-dev/levee/tools/report"
)

// Run converts both sides of a run into a run of levee's one report
// schema (package report): the generator's phases, latencies and series,
// the backend as the run's one instance (aligned to the generator's
// clock), the share of handler runs wasted on clients that had gone, and
// the recovery after trigger (a phase name; "" for none).
func (res *Result) Run(trigger string) report.Run {
	run := res.Load.Run()
	run.Name = res.Config.Name
	run.Protection = res.Config.Protection
	if run.Protection == "" {
		run.Protection = "none"
	}
	run.Client = res.Config.Client
	in, is := res.Server.Instance("backend", res.Load.Start)
	run.Instances = []report.Instance{in}
	run.Series.Instances = []report.InstanceSeries{is}
	run.WastedWorkShare = res.Server.WastedWorkShare()
	if trigger != "" {
		run.RecoveryS = run.RecoveryAfter(trigger)
	}
	return run
}
