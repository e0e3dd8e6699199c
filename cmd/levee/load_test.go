package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

func okServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"degraded": false, "criticality": %q}`, r.Header.Get("Levee-Criticality"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestLoadAttackJSON(t *testing.T) {
	srv := okServer(t)
	code, stdout, stderr := levee(t, "load", "attack", srv.URL, "--phase", "a=100:200ms", "--phase", "b=0-200:200ms",
		"--criticality", "CRITICAL=1,SHEDDABLE=1", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r report.Report
	strict(t, []byte(stdout), &r)
	if r.Tool != "load attack" || len(r.Runs) != 1 || len(r.Runs[0].Phases) != 2 {
		t.Fatalf("report: %+v", r)
	}
	a, b := r.Runs[0].Phases[0], r.Runs[0].Phases[1]
	if a.OfferedRPS != 100 || a.GoodputRPS != 100 || b.OfferedRPS != 100 || len(a.ByCriticality) != 2 || a.Latency.P99 <= 0 {
		t.Errorf("phases %+v / %+v: want 100/s offered and served, a ramp averaging 100/s, two criticalities, a p99", a, b)
	}
}

func TestLoadRefusals(t *testing.T) {
	srv := okServer(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"load", "attack", "http://example.com/"}, `target host "example.com" is not on loopback; name it with --allow-host example.com`},
		{[]string{"load", "attack", srv.URL, "--rate", "30000"}, "beyond the hard caps: phase \"load\" offers 30000 requests/s, the cap is 20000"},
		{[]string{"load", "attack", srv.URL, "--duration", "11m"}, "the schedule lasts 11m0s, the cap is 10m0s"},
		{[]string{"load", "attack", srv.URL, "--max-rate", "1e7"}, "--max-rate 1e+07 out of (0, 200000]"},
		{[]string{"load", "attack", srv.URL, "--client", "naiv"}, `unknown client model "naiv" (did you mean "naive"?)`},
		{[]string{"load", "attack", srv.URL, "--phase", "a=fast:1s"}, `--phase "a=fast:1s": rate "fast"`},
		{[]string{"load", "attack", srv.URL, "--phase", "a=1:1s", "--trigger", "b"}, `--trigger "b": no such phase`},
		{[]string{"load", "attack", srv.URL, "-H", "NoColon"}, `header "NoColon": want 'NAME: VALUE'`},
		{[]string{"load", "attack", srv.URL, "--criticality", "URGENT=1"}, `unknown criticality "URGENT"`},
		{[]string{"load", "plan", srv.URL, "--retry", "sometimes"}, `--retry "sometimes": want naive, levee, none or off`},
		{[]string{"load", "drill", srv.URL, "--level", "1"}, "give --admin URL"},
		{[]string{"load", "drill", srv.URL, "--check", "1 status=200"}, "--check: check \"1 status=200\": want LEVELS: CONDITION"},
		{[]string{"load", "atack", srv.URL}, `did you mean "attack"?`},
	}
	for _, tt := range tests {
		code, stdout, stderr := levee(t, tt.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tt.want) {
			t.Errorf("levee %v: exit %d, stdout %q, stderr %q; want %d, nothing, %q", tt.args, code, stdout, stderr, exitUsage, tt.want)
		}
	}
}

// Ctrl-C stops an attack cleanly: the partial report is printed and the
// exit status says it was interrupted.
func TestLoadAttackInterrupted(t *testing.T) {
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 20 {
			cancel()
		}
	}))
	defer srv.Close()
	var stdout, stderr strings.Builder
	code := runCtx(ctx, []string{"load", "attack", srv.URL, "--rate", "100", "--duration", "30s", "--json", "-q"}, &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "interrupted: the report covers what ran") {
		t.Errorf("exit %d, stderr %q; want 1 and the interruption named", code, stderr.String())
	}
	var r report.Report
	if err := json.Unmarshal([]byte(stdout.String()), &r); err != nil {
		t.Fatalf("partial report: %v", err)
	}
	if run := r.Runs[0]; !run.Stopped || run.Phases[0].EndS > 5 || run.Phases[0].OfferedRPS < 50 {
		t.Errorf("run stopped %v, phase %+v; want stopped after about 0.2 s at 100/s", run.Stopped, run.Phases[0])
	}
}

// TestLoadPlanQuick: the plan's flags reach the planner and its report
// reads back. Against a service that answers at once, the ramp grows from
// --start 20/s by the default 1.5 to --max 40/s in steps of 500 ms and
// meets the SLO at every rate: the knee is the maximum, nothing breaks,
// and the peak of 100/s takes N+2 = 5 instances.
//
// A step that breaks the SLO is measured again before the plan believes
// it (the planner's guard against a busy machine, tested on virtual time
// in tools/load): a broken step may appear, followed at once by its
// confirmation at the same rate, which then meets the SLO. The SLO's p99
// of 1 s is set from the spread measured on the shared 2-core machine,
// with the race detector, beside two CPU hogs, a race test run and two
// other copies of this test: over 225 steps the steps' p99 had a median
// of 9 ms, a 99th percentile of 62 ms and a maximum of 118 ms; in 45
// further plans one step reached 231 ms, broke the default 200 ms SLO and
// took a fourth step to confirm, which this test used to refuse.
func TestLoadPlanQuick(t *testing.T) {
	srv := okServer(t)
	start := time.Now()
	code, stdout, stderr := levee(t, "load", "plan", srv.URL, "--start", "20", "--max", "40", "--step", "500ms", "--slo-p99", "1s",
		"--retry", "off", "--peak", "100", "--json", "-q")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	t.Logf("plan took %v", time.Since(start))
	var r load.PlanReport
	strict(t, []byte(stdout), &r)
	p := r.Plan
	if p.SLO.P99 != time.Second || p.KneeRPS != 40 || p.BreakingRPS != 0 || p.Metastability != nil || p.Sizing == nil || p.Sizing.NPlus2 != 5 {
		t.Errorf("plan %+v; want the SLO (p99 1s) met up to the maximum 40/s, no metastability check, N+2 = 5 for 100/s", p)
	}
	var rates []float64
	for i, s := range p.Steps {
		ok := s.MeetsSLO && !s.Saturated
		switch {
		case s.Stage != "ramp":
			t.Errorf("step %d: %+v, want a ramp step", i, s)
		case s.Confirm && (i == 0 || p.Steps[i-1].Confirm || p.Steps[i-1].OfferedRPS != s.OfferedRPS || p.Steps[i-1].MeetsSLO && !p.Steps[i-1].Saturated):
			t.Errorf("step %d: %+v confirms %+v; want a confirmation only after a broken step at its rate", i, s, p.Steps[max(i-1, 0)])
		case s.Confirm && !ok:
			t.Errorf("step %d: %+v; the ramp went on after a rate broke the SLO twice", i, s)
		case !s.Confirm && !ok && (i+1 == len(p.Steps) || !p.Steps[i+1].Confirm):
			t.Errorf("step %d: %+v broke the SLO and was not measured again", i, s)
		case !s.Confirm:
			rates = append(rates, s.OfferedRPS)
		}
	}
	if want := []float64{20, 30, 40}; !slices.Equal(rates, want) {
		t.Errorf("ramp at %v requests/s, want %v", rates, want)
	}
	if len(r.Runs) != 1 || len(r.Runs[0].Phases) != len(p.Steps) {
		t.Fatalf("report: %d runs, want 1 with a phase for each of the %d steps", len(r.Runs), len(p.Steps))
	}
	for _, ph := range r.Runs[0].Phases {
		if d := ph.EndS - ph.StartS; math.Abs(d-0.5) > 1e-9 {
			t.Errorf("phase %q lasted %v s, want 0.5 (--step)", ph.Name, d)
		}
	}
}

func TestLoadDrillWithoutAdmin(t *testing.T) {
	srv := okServer(t)
	code, stdout, _ := levee(t, "load", "drill", srv.URL, "--check", "0: json:degraded=false", "--check", "*: status=200", "--hold", "300ms", "-q")
	if code != 0 || !strings.Contains(stdout, "drill passed") {
		t.Errorf("exit %d:\n%s", code, stdout)
	}
	code, stdout, stderr := levee(t, "load", "drill", srv.URL, "--check", "0: json:degraded=true", "--hold", "300ms", "-q")
	if code != exitFailure || !strings.Contains(stderr, `load drill failed: level 0: check "0: json:degraded=true" failed on`) || !strings.Contains(stdout, "drill FAILED") {
		t.Errorf("exit %d, stderr %q:\n%s", code, stderr, stdout)
	}
}
