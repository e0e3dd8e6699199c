package load

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

func TestRunBadConfig(t *testing.T) {
	ok := func(context.Context, *Call) Outcome { return Goodput }
	one := []Phase{{Name: "a", Rate: 1, Duration: time.Second}}
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"no phases", Config{Do: ok}, ErrNoPhases},
		{"no func", Config{Phases: one}, ErrNoFunc},
		{"rate over the cap", Config{Do: ok, Phases: []Phase{{Name: "a", Rate: 30000, Duration: time.Second}}}, ErrLimits},
		{"ramp over the cap", Config{Do: ok, Phases: []Phase{{Name: "a", Rate: 1, To: 200, Duration: time.Second}}, Limits: Limits{MaxRate: 100}}, ErrLimits},
		{"too long", Config{Do: ok, Phases: []Phase{{Name: "a", Rate: 1, Duration: 11 * time.Minute}}}, ErrLimits},
		{"cap above the ceiling", Config{Do: ok, Phases: one, Limits: Limits{MaxRate: CeilingRate + 1}}, ErrLimits},
		{"duration cap above the ceiling", Config{Do: ok, Phases: one, Limits: Limits{MaxDuration: 2 * time.Hour}}, ErrLimits},
	}
	for _, tt := range tests {
		if _, err := Run(context.Background(), tt.cfg); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	for _, p := range []Phase{{Name: "neg", Rate: -1, Duration: time.Second}, {Name: "nan", Rate: math.NaN(), Duration: time.Second}, {Name: "zero", Rate: 1}} {
		if _, err := Run(context.Background(), Config{Do: ok, Phases: []Phase{p}}); err == nil {
			t.Errorf("phase %+v: err = nil, want an error", p)
		}
	}
	if _, err := Run(context.Background(), Config{Do: ok, Phases: one, Mix: Mix{Criticalities: []Share{{Name: "URGENT", Weight: 1}}}}); err == nil || !strings.Contains(err.Error(), `unknown criticality "URGENT"`) {
		t.Errorf("bad criticality: err = %v", err)
	}
}

// TestRunCounts checks that every arrival ends in exactly one outcome and
// that outcomes land in the phase they were offered in.
func TestRunCounts(t *testing.T) {
	outcomes := []Outcome{Goodput, Rejected, Throttled, Failed}
	rep, err := Run(context.Background(), Config{
		Phases: []Phase{
			{Name: "a", Rate: 200, Duration: 100 * time.Millisecond},
			{Name: "idle", Rate: 0, Duration: 20 * time.Millisecond},
			{Name: "b", Rate: 400, Duration: 100 * time.Millisecond},
		},
		Do: func(ctx context.Context, c *Call) Outcome {
			c.Attempt()
			c.Attempt()
			return outcomes[c.Phase%len(outcomes)]
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []PhaseStats{
		{Name: "a", Tally: report.Tally{Offered: 20, Attempted: 40, Goodput: 20}},
		{Name: "idle"},
		{Name: "b", Tally: report.Tally{Offered: 40, Attempted: 80, Throttled: 40}},
	}
	for i, w := range want {
		if g := rep.Phases[i]; g.Name != w.Name || g.Tally != w.Tally {
			t.Errorf("phase %d = %+v, want %+v", i, g.Tally, w.Tally)
		}
	}
	var offered, served int64
	for _, b := range rep.Series {
		offered += b.Offered
		served += b.Served
	}
	if offered != 60 || served != 20 {
		t.Errorf("series: offered %d served %d, want 60 and 20", offered, served)
	}
	if l := rep.Phases[0].Latency; l.P50 <= 0 || l.P99 < l.P50 || len(l.Quantiles) != len(quantiles) {
		t.Errorf("phase a latency %+v, want 0 < p50 ≤ p99 and %d quantiles", l, len(quantiles))
	}
	if rep.Stopped {
		t.Error("Stopped set on a run that completed")
	}
}

func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	rep, err := Run(context.Background(), Config{
		Phases:      []Phase{{Name: "a", Rate: 100, Duration: 100 * time.Millisecond}},
		MaxInFlight: 3,
		Do: func(ctx context.Context, c *Call) Outcome {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return Goodput
		},
		Drain: time.Millisecond,
	})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Phases[0]
	if p.Offered != 10 || p.GenErrors != 7 || p.Goodput != 3 || rep.GenErrors != 7 || rep.Cancelled != 3 {
		t.Errorf("got offered %d generator errors %d (run %d) goodput %d cancelled %d, want 10, 7 (7), 3, 3",
			p.Offered, p.GenErrors, rep.GenErrors, p.Goodput, rep.Cancelled)
	}
	run := rep.Run()
	if run.GeneratorErrors != 7 || run.Phases[0].FailedBy["generator"] != 70 || run.Phases[0].FailedRPS != 70 {
		t.Errorf("report: generator errors %d, failed %v/s by %v; want 7, 70/s all generator", run.GeneratorErrors, run.Phases[0].FailedRPS, run.Phases[0].FailedBy)
	}
}

func TestFailureClasses(t *testing.T) {
	classes := []Failure{Timeout, Reset, Refused, Status5xx, Status4xx, OtherFailure}
	var n atomic.Int64
	rep, err := Run(context.Background(), Config{
		Phases: []Phase{{Name: "a", Rate: 600, Duration: 100 * time.Millisecond}},
		Do: func(ctx context.Context, c *Call) Outcome {
			c.Failure = classes[n.Add(1)%int64(len(classes))]
			return Failed
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Phases[0].FailedBy
	for _, f := range classes {
		if got[f.String()] != 10 {
			t.Errorf("failed by %s = %d, want 10 (all: %v)", f, got[f.String()], got)
		}
	}
}

// TestStop: a cancelled run stops sending, and its result covers the
// phases that ran, the current one cut where it stopped.
func TestStop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var sent atomic.Int64
	rep, err := Run(ctx, Config{
		Phases: []Phase{
			{Name: "first", Rate: 100, Duration: 200 * time.Millisecond},
			{Name: "second", Rate: 100, Duration: 10 * time.Second},
			{Name: "never", Rate: 100, Duration: time.Second},
		},
		Do: func(context.Context, *Call) Outcome {
			if sent.Add(1) == 30 {
				cancel()
			}
			return Goodput
		},
		Grace: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Stopped || len(rep.Phases) != 2 {
		t.Fatalf("stopped %v with %d phases, want true and 2 (first, second)", rep.Stopped, len(rep.Phases))
	}
	second := rep.Phases[1]
	if second.Duration >= 10*time.Second || second.Offered > 15 || second.Offered < 10 {
		t.Errorf("second phase ran %v and offered %d, want cut short after about 10 arrivals", second.Duration, second.Offered)
	}
	if run := rep.Run(); !run.Stopped || run.Phases[1].OfferedRPS < 50 {
		t.Errorf("report: stopped %v, second phase offered %v/s (rate over the time it ran, about 100/s)", run.Stopped, run.Phases[1].OfferedRPS)
	}
}

// TestStallInLatency: requests scheduled while the service stalls wait
// for it, and their latency (from the scheduled time) shows it in the
// phase's distribution and in the bucket series.
func TestStallInLatency(t *testing.T) {
	const stall = 300 * time.Millisecond
	var first atomic.Int64 // the first scheduled time, Unix ns
	rep, err := Run(context.Background(), Config{
		Phases: []Phase{{Name: "a", Rate: 200, Duration: 700 * time.Millisecond}},
		Do: func(ctx context.Context, c *Call) Outcome {
			first.CompareAndSwap(0, c.Sched.UnixNano())
			// The service stalls from 100 ms after the first arrival for
			// 300 ms: whatever arrives meanwhile waits for its end.
			end := time.Unix(0, first.Load()).Add(100*time.Millisecond + stall)
			if c.Sched.After(end.Add(-stall)) && c.Sched.Before(end) {
				time.Sleep(time.Until(end))
			}
			return Goodput
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := rep.Phases[0].Latency
	if l.Max < 0.9*stall.Seconds() {
		t.Errorf("max latency %.3fs, want ≥ %.2fs: the stall must show", l.Max, 0.9*stall.Seconds())
	}
	if l.P50 >= 0.5*stall.Seconds() {
		t.Errorf("p50 %.3fs: most requests came outside the stall", l.P50)
	}
	var worst time.Duration
	for _, b := range rep.Series {
		worst = max(worst, b.P99)
	}
	if worst < stall*9/10 {
		t.Errorf("worst bucket p99 %v, want ≥ %v", worst, stall*9/10)
	}
	if run := rep.Run(); len(run.Series.P99S) != len(rep.Series) {
		t.Errorf("report series has %d p99 values, want %d", len(run.Series.P99S), len(rep.Series))
	}
}

func TestCallNil(t *testing.T) {
	var c *Call
	c.Attempt() // must not panic
	if got := CallFrom(context.Background()); got != nil {
		t.Errorf("CallFrom(empty) = %v, want nil", got)
	}
}

func TestOutcomeAndFailureNames(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{Goodput.String(), "goodput"}, {Rejected.String(), "rejected"}, {Throttled.String(), "throttled"},
		{Failed.String(), "failed"}, {GenError.String(), "generator_error"}, {Outcome(42).String(), "Outcome(42)"},
		{Timeout.String(), "timeout"}, {Status5xx.String(), "status_5xx"}, {Failure(99).String(), "Failure(99)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("name %q, want %q", tt.got, tt.want)
		}
	}
}

func TestProgressLine(t *testing.T) {
	p := Progress{Elapsed: 2500 * time.Millisecond, Phase: "spike", Offered: 1000, Attempted: 1800, Goodput: 400,
		Rejected: 100, Failed: 500, FailedBy: map[string]float64{"timeout": 450, "reset": 50}, InFlight: 900,
		P50: 1500 * time.Microsecond, P99: 980 * time.Millisecond}
	want := "  2.5s spike      offered   1000/s  attempted   1800/s  goodput    400/s  rejected   100/s  throttled     0/s  p50 1.5ms  p99 980ms  in flight 900  failed 500/s reset 50 timeout 450"
	if got := p.String(); got != want {
		t.Errorf("progress line\n got %q\nwant %q", got, want)
	}
}

func TestClosedBestSecond(t *testing.T) {
	// One worker and a service taking 10ms a request: at most 100 in any
	// second, and Closed returns once d is over.
	got := Closed(context.Background(), 1, 0, 1500*time.Millisecond, func(ctx context.Context) Outcome {
		select {
		case <-ctx.Done():
			return Failed
		case <-time.After(10 * time.Millisecond):
		}
		return Goodput
	})
	if got <= 0 || got > 100 {
		t.Errorf("Closed = %v req/s, want in (0, 100] (one worker, 10ms per request)", got)
	}
}

// TestClasses: the mix's criticalities and tenants reach the Func, and
// the result splits every outcome by them, criticalities in the order
// levee sheds them.
func TestClasses(t *testing.T) {
	rep, err := Run(context.Background(), Config{
		Phases: []Phase{{Name: "a", Rate: 1000, Duration: 200 * time.Millisecond}},
		Mix: Mix{
			Criticalities: []Share{{"CRITICAL_PLUS", 1}, {"SHEDDABLE", 3}},
			Tenants:       []Share{{"big", 3}, {"small", 1}},
		},
		Do: func(ctx context.Context, c *Call) Outcome {
			c.Attempt()
			if c.Criticality.String() == "SHEDDABLE" {
				return Rejected
			}
			return Goodput
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	run := rep.Run()
	p := run.Phases[0]
	if len(p.ByCriticality) != 2 || p.ByCriticality[0].Name != "SHEDDABLE" || p.ByCriticality[1].Name != "CRITICAL_PLUS" {
		t.Fatalf("by criticality %+v, want SHEDDABLE then CRITICAL_PLUS", p.ByCriticality)
	}
	sh, cp := p.ByCriticality[0], p.ByCriticality[1]
	// An evenly spread sequence is off by at most an arrival or two over
	// 200 (5/s each here).
	if math.Abs(sh.OfferedRPS-750) > 10 || sh.RejectedRPS != sh.OfferedRPS || sh.AttemptedRPS != sh.OfferedRPS ||
		cp.GoodputRPS != cp.OfferedRPS || sh.OfferedRPS+cp.OfferedRPS != 1000 {
		t.Errorf("SHEDDABLE %+v, CRITICAL_PLUS %+v; want 750/s ± 10 all rejected and the rest all goodput", sh.Rates, cp.Rates)
	}
	if len(p.ByTenant) != 2 || p.ByTenant[0].Name != "big" || math.Abs(p.ByTenant[0].OfferedRPS-750) > 10 || p.ByTenant[0].OfferedRPS+p.ByTenant[1].OfferedRPS != 1000 {
		t.Errorf("by tenant %+v, want big 750/s ± 10 and small the rest", p.ByTenant)
	}
}
