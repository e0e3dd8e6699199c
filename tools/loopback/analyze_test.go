package loopback

import (
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

// series builds a 100ms-bucket series from per-second rates.
func series(perSec ...int64) []int64 {
	var s []int64
	for _, r := range perSec {
		for i := 0; i < 10; i++ {
			s = append(s, r/10)
		}
	}
	return s
}

func buckets(goodput []int64) []load.Bucket {
	var out []load.Bucket
	for _, g := range goodput {
		out = append(out, load.Bucket{Tally: report.Tally{Offered: 10, Goodput: g}})
	}
	return out
}

// TestRun checks the conversion of both sides of a run: phases from the
// generator, the backend aligned to the generator's clock, wasted work,
// and the figures computed on the result.
func TestRun(t *testing.T) {
	start := time.Unix(1000, 0)
	phases := []load.PhaseStats{
		{Name: "normal", Offset: 0, Duration: 2 * time.Second, Tally: report.Tally{Offered: 200, Attempted: 200, Goodput: 200}},
		{Name: "spike", Offset: 2 * time.Second, Duration: 2 * time.Second, Tally: report.Tally{Offered: 400, Attempted: 900, Goodput: 40, Rejected: 100, Failed: 250}, GenErrors: 10,
			Latency: report.Latency{P50: 0.0015, P99: 0.02}},
		{Name: "after", Offset: 4 * time.Second, Duration: 5 * time.Second, Tally: report.Tally{Offered: 500, Goodput: 400}},
	}
	// The backend started 1 s before the generator: its series has one
	// more second in front. It answers 100/s in time from the generator's
	// second 5 on, 1 s after the spike.
	ok := series(0, 100, 100, 300, 300, 0, 100, 100, 100, 100)
	late := series(0, 0, 0, 200, 200, 0, 0, 0, 0, 0)
	res := &Result{
		Config: Config{Name: "none-1", Protection: backend.None, Client: Naive},
		Load: &load.Result{Start: start, Resolution: 100 * time.Millisecond, Phases: phases,
			Series: buckets(series(100, 100, 10, 10, 0, 100, 100, 100, 100)), GenErrors: 10},
		Server: backend.Report{Series: backend.Series{
			Start: start.Add(-time.Second), Resolution: 100 * time.Millisecond,
			Runs: ok, Late: late, OK: ok, OKLate: late,
			Rejected: make([]int64, len(ok)), Other: make([]int64, len(ok)),
		}},
	}
	run := res.Run("spike")
	sp := run.Phases[1]
	want := report.Rates{OfferedRPS: 200, AttemptedRPS: 450, GoodputRPS: 20, RejectedRPS: 50, FailedRPS: 130}
	if sp.Rates != want {
		t.Errorf("spike rates = %+v, want %+v (generator errors counted as failed)", sp.Rates, want)
	}
	if sp.Latency.P50 != 0.0015 || sp.Latency.P99 != 0.02 {
		t.Errorf("spike latency = %+v, want p50 0.0015 s, p99 0.02 s", sp.Latency)
	}
	if run.Name != "none-1" || run.Protection != "none" || run.Client != "naive" || run.GeneratorErrors != 10 || run.Attempts != 1100 {
		t.Errorf("run = %q %q %q, generator errors %d, attempts %d", run.Name, run.Protection, run.Client, run.GeneratorErrors, run.Attempts)
	}
	if run.RecoveryS == nil || *run.RecoveryS != 1 {
		t.Errorf("recovery_s = %v, want 1", run.RecoveryS)
	}
	// 400 of 1200 handler runs finished after their client's deadline.
	if run.WastedWorkShare != 0.333 {
		t.Errorf("wasted_work_share = %v, want 0.333", run.WastedWorkShare)
	}
	is := run.Series.Instances[0]
	if len(is.ServedRPS) != 90 || is.ServedRPS[0] != 100 || is.ServedRPS[25] != 100 || is.WastedRPS[25] != 200 {
		t.Errorf("backend series not aligned to the generator's clock: %d buckets, served[0] %v served[25] %v wasted[25] %v",
			len(is.ServedRPS), is.ServedRPS[0], is.ServedRPS[25], is.WastedRPS[25])
	}
	if got, ok := run.ServerRecoveryAfter("spike", 2); !ok || got != 1 {
		t.Errorf("ServerRecoveryAfter = %v, %v, want 1, true", got, ok)
	}
	if in := run.Instances[0]; in.Served != 800 || in.Wasted != 400 || in.Received != 1200 {
		t.Errorf("backend totals = %+v, want served 800, wasted 400, received 1200", in)
	}
}
