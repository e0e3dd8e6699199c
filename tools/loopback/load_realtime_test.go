//go:build realtime

// Real-time checks of levee load (issue "levee load"): a capacity plan
// against a CPU-bound GOMAXPROCS=1 backend pinned to one CPU, compared
// with a closed-loop measurement of the same backend in the same run; the
// metastability check of the bare and the levee-protected backend with
// naive retrying clients; a 1 s stall in the latency histogram; and the
// generator's own cost. The test process pins itself to the other CPU.
// About 4 minutes on a quiet 2-CPU machine:
//
//	go test -tags realtime -run 'TestLoad' -count=1 -v -timeout 30m ./tools/loopback/
//
// LEVEE_LOAD_STEP (default 3s) sets the plan's step, LEVEE_LOAD_WORK
// (default 2ms) the backend's CPU per request, LEVEE_LOAD_REPEAT (default
// 1) the alternated repetitions of the plan comparison.
package loopback

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return d
	}
	return def
}

// pinGenerator pins this process to the generator's CPU, away from the
// backend child.
func pinGenerator(t *testing.T) {
	if cpu := Place().Loadgen; cpu >= 0 {
		if err := PinSelf(cpu); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadPlanCapacity: for the bare backend and the levee-protected one,
// a closed-loop measurement and a plan of the same backend. The bare
// backend's capacity as the plan finds it (its peak goodput, counted as
// what completed while each step lasted; the knee at the SLO is shown
// beside it) must be within [0.85, 1.10] of its closed-loop capacity (the
// open loop costs about a tenth more CPU per request, see below); with
// naive clients (2 immediate retries) the bare backend must not recover
// after the overload and the levee-protected one must.
func TestLoadPlanCapacity(t *testing.T) {
	pinGenerator(t)
	step := envDuration(t, "LEVEE_LOAD_STEP", 3*time.Second)
	work := envDuration(t, "LEVEE_LOAD_WORK", 2*time.Millisecond)
	repeat := 1
	if v, err := strconv.Atoi(os.Getenv("LEVEE_LOAD_REPEAT")); err == nil && v > 0 {
		repeat = v
	}
	ctx := context.Background()
	var ratios []float64
	recovered := map[string][]bool{}
	for i := 0; i < repeat; i++ {
		for _, prot := range []string{backend.None, backend.Levee} {
			b, err := StartBackend(ctx, prot, work, 20*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			url := "http://" + b.Addr + "/work"
			h, err := load.NewHTTP(load.HTTP{URL: url, Client: load.ClientNone, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// A neighbour's noise only lowers a closed-loop measurement:
			// the better of two.
			closed := max(load.Closed(ctx, 8, 500*time.Millisecond, 3*time.Second, h.Once()),
				load.Closed(ctx, 8, 500*time.Millisecond, 3*time.Second, h.Once()))
			h.CloseIdleConnections()
			t.Logf("%s #%d: backend GOMAXPROCS=%d %s, %d iterations per request; closed-loop capacity %.0f req/s",
				prot, i+1, b.GOMAXPROCS, b.Pinned, b.Work.Iterations, closed)
			rep, err := load.Plan(ctx, load.PlanConfig{
				Target:  load.HTTP{URL: url, Timeout: time.Second},
				SLO:     load.SLO{P99: 100 * time.Millisecond, ErrorRate: 0.01},
				Start:   0.3 * closed,
				Max:     4 * closed,
				Step:    step,
				Retry:   load.ClientNaive,
				Retries: 2,
				PeakRPS: 10 * closed,
				CPU:     &load.ProcessCPU{PID: b.PID, Cores: 1},
				Budget:  15 * time.Minute,
				OnStep: func(s load.PlanStep) {
					t.Logf("  %s %-6s %6.0f/s → goodput %6.0f/s, p99 %6.1f ms, errors %5.1f%%, cpu %.3f ms/req, util %.0f%%",
						prot, s.Stage, s.OfferedRPS, s.GoodputRPS, 1000*s.P99S, 100*s.ErrorRate, 1000*s.CPUPerRequestS, 100*s.Utilisation)
				},
			})
			srv, serr := b.Stop()
			if err != nil {
				t.Fatal(err)
			}
			if serr != nil {
				t.Fatal(serr)
			}
			var text bytes.Buffer
			_ = rep.WriteText(&text)
			t.Logf("%s #%d plan (backend CPU %.1fs, its threads waited %.1fs for a CPU):\n%s", prot, i+1, srv.CPU.Seconds(), srv.RunDelay.Seconds(), text.String())
			p := rep.Plan
			if p.Stopped || p.Metastability == nil {
				t.Fatalf("%s: plan stopped (%s) or without its metastability check", prot, p.Reason)
			}
			recovered[prot] = append(recovered[prot], p.Metastability.Recovered)
			if prot == backend.None {
				// The closed loop measures the most the server completes;
				// the plan's like figure is its peak goodput. The knee sits
				// below it by as much as the SLO's p99 asks (1 core, 2 ms
				// requests, p99 ≤ 100 ms: about 0.8–0.9 of it), so it is
				// shown beside it, not held to it.
				ratios = append(ratios, p.PeakGoodputRPS/closed)
				t.Logf("%s #%d: knee %.0f/s = %.3f of the closed loop, peak goodput %.0f/s = %.3f", prot, i+1, p.KneeRPS, p.KneeRPS/closed, p.PeakGoodputRPS, p.PeakGoodputRPS/closed)
			}
		}
	}
	med, lo, hi := report.Median(ratios)
	t.Logf("bare backend: the plan's peak goodput ÷ closed-loop capacity, median of %d: %.3f [%.3f–%.3f]", len(ratios), med, lo, hi)
	// The plan's steps are open-loop, each request on its own schedule,
	// and on one core they cost more CPU per request than the closed
	// loop's eight back-to-back keep-alive callers (2.1–2.2 ms against
	// 1.9 ms per 2 ms request in one run, backend on its own core: the
	// open loop's wake-ups): the plan's peak sits about a tenth below.
	if med < 0.85 || med > 1.10 {
		t.Errorf("bare backend: the plan's peak goodput ÷ closed-loop capacity = %.3f, want within [0.85, 1.10]", med)
	}
	t.Logf("recovered after the overload with naive clients: bare %v, levee %v", recovered[backend.None], recovered[backend.Levee])
	if majority(recovered[backend.None]) {
		t.Errorf("the bare backend recovered after the overload with naive retrying clients (%v), want it to stay down", recovered[backend.None])
	}
	if !majority(recovered[backend.Levee]) {
		t.Errorf("the levee-protected backend did not recover after the overload (%v), want it to shed and recover", recovered[backend.Levee])
	}
}

func majority(xs []bool) bool {
	n := 0
	for _, x := range xs {
		if x {
			n++
		}
	}
	return 2*n > len(xs)
}

// TestLoadStall: a server that stalls for 1 s shows the stall in the
// latency histogram (the phase's p99 and maximum) and in the per-bucket
// p99, while the phase before it does not.
func TestLoadStall(t *testing.T) {
	var stallFrom, stallTo atomic.Int64 // Unix ns
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().UnixNano()
		if now >= stallFrom.Load() && now < stallTo.Load() {
			time.Sleep(time.Duration(stallTo.Load() - now))
		}
	}))
	defer srv.Close()
	stallFrom.Store(math.MaxInt64)
	h, err := load.NewHTTP(load.HTTP{URL: srv.URL, Client: load.ClientNone, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(1500 * time.Millisecond) // 0.5 s into the "stall" phase
		from := time.Now()
		stallTo.Store(from.Add(time.Second).UnixNano())
		stallFrom.Store(from.UnixNano())
	}()
	res, err := load.Run(context.Background(), load.Config{
		Phases: []load.Phase{
			{Name: "before", Rate: 200, Duration: time.Second},
			{Name: "stall", Rate: 200, Duration: 2 * time.Second},
		},
		Do: h.Func(),
	})
	if err != nil {
		t.Fatal(err)
	}
	run := res.Run()
	before, stall := run.Phases[0].Latency, run.Phases[1].Latency
	var worst float64
	for _, p := range run.Series.P99S {
		worst = max(worst, p)
	}
	t.Logf("before: p50 %.4fs p99 %.4fs max %.4fs; stall phase: p50 %.4fs p90 %.4fs p99 %.4fs max %.4fs; worst 100 ms bucket p99 %.3fs",
		before.P50, before.P99, before.Max, stall.P50, stall.P90, stall.P99, stall.Max, worst)
	if stall.Max < 0.95 || stall.P99 < 0.8 || worst < 0.8 {
		t.Errorf("stall phase: max %.3fs, p99 %.3fs, worst bucket p99 %.3fs; want the 1 s stall to show (≥ 0.95, ≥ 0.8, ≥ 0.8)", stall.Max, stall.P99, worst)
	}
	if before.P99 > 0.5 {
		t.Errorf("before the stall: p99 %.3fs, want well under the stall", before.P99)
	}
}

// TestLoadGeneratorCost: the generator, pinned to one CPU, against a
// trivial backend (no work per request) pinned to the other: the CPU it
// spends per request and the highest rate it sustains (goodput ≥ 97% of
// offered, lag ≤ 100 ms, no generator error).
func TestLoadGeneratorCost(t *testing.T) {
	pinGenerator(t)
	ctx := context.Background()
	b, err := StartBackend(ctx, backend.None, 0, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	h, err := load.NewHTTP(load.HTTP{URL: "http://" + b.Addr + "/work", Client: load.ClientNone, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseIdleConnections()
	d := envDuration(t, "LEVEE_LOAD_COST_STEP", 2*time.Second)
	sustained := 0.0
	for _, rate := range []float64{1000, 2000, 4000, 6000, 8000, 12000, 16000, 24000, 32000} {
		cpu0, srv0 := selfCPU(), procCPU(b.PID)
		res, err := load.Run(ctx, load.Config{
			Phases: []load.Phase{{Name: "cost", Rate: rate, Duration: d}},
			Do:     h.Func(), Drain: 2 * time.Second,
			Limits: load.Limits{MaxRate: load.CeilingRate},
		})
		if err != nil {
			t.Fatal(err)
		}
		cpu, srvCPU := selfCPU()-cpu0, procCPU(b.PID)-srv0
		p := res.Phases[0]
		ok := float64(p.Goodput) >= 0.97*float64(p.Offered) && res.MaxLag <= 100*time.Millisecond && res.GenErrors == 0
		t.Logf("%6.0f/s offered: goodput %6.0f/s, lag %v, generator errors %d; generator CPU %.1f µs per request (%.0f%% of its core), backend %.0f%% of its core",
			rate, p.Rate(p.Goodput), res.MaxLag.Round(time.Millisecond), res.GenErrors,
			1e6*cpu.Seconds()/float64(max(p.Offered, 1)), 100*cpu.Seconds()/d.Seconds(), 100*srvCPU/d.Seconds())
		if !ok {
			break
		}
		sustained = rate
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the generator sustained %.0f requests/s on one core against a trivial loopback backend", sustained)
	if sustained < 1000 {
		t.Errorf("the generator sustained %.0f requests/s, want at least 1000", sustained)
	}
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func procCPU(pid int) float64 {
	r, err := (&load.ProcessCPU{PID: pid}).Read(context.Background())
	if err != nil {
		return 0
	}
	return r.Seconds
}

// TestLoadDrillOverload drives load past the threshold of a levee-protected
// backend and of a bare one, with the four criticalities alike: the levee
// backend sheds lowest criticality first (untrusted callers cannot raise
// theirs above CRITICAL, so CRITICAL_PLUS is shed as CRITICAL) and the
// drill passes; the bare backend rejects nothing explicitly and the drill
// fails, saying so.
func TestLoadDrillOverload(t *testing.T) {
	pinGenerator(t)
	ctx := context.Background()
	work := envDuration(t, "LEVEE_LOAD_WORK", 2*time.Millisecond)
	for _, prot := range []string{backend.Levee, backend.None} {
		b, err := StartBackend(ctx, prot, work, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + b.Addr + "/work"
		h, _ := load.NewHTTP(load.HTTP{URL: url, Client: load.ClientNone, Timeout: 5 * time.Second})
		closed := load.Closed(ctx, 8, 500*time.Millisecond, 2*time.Second, h.Once())
		h.CloseIdleConnections()
		rep, err := load.Drill(ctx, load.DrillConfig{
			Target: load.HTTP{URL: url, Timeout: time.Second}, Levels: []int{0}, OverloadRPS: 3 * closed, Hold: 4 * time.Second,
		})
		b.Stop()
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		_ = rep.WriteText(&text)
		t.Logf("%s (closed-loop capacity %.0f req/s):\n%s", prot, closed, text.String())
		if prot == backend.Levee && !rep.Drill.Passed {
			t.Errorf("levee backend: the drill failed: %v", rep.Drill.Failures)
		}
		if prot == backend.None && rep.Drill.Passed {
			t.Errorf("bare backend: the drill passed, want it to find nothing shed")
		}
	}
}
