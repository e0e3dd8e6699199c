//go:build realtime

// The loopback check of issue 2: a real overload over loopback sockets,
// backend and generator in separate pinned processes. It takes about 6
// minutes and needs a quiet-ish 2-CPU machine:
//
//	go test -tags realtime -run TestLoopback -v -timeout 20m ./tools/loopback/
//
// LOOPBACK_REPEAT (default 3) sets the number of alternated runs per
// protection; LOOPBACK_WORK (e.g. "1ms,20ms", the default) the CPU costs.
package loopback

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

// The schedule, in multiples of the measured capacity.
func loopbackPhases(c float64) []load.Phase {
	return []load.Phase{
		{Name: "0.7x", Rate: 0.7 * c, Duration: 4 * time.Second},
		{Name: "2x", Rate: 2 * c, Duration: 6 * time.Second},
		{Name: "0.5x-a", Rate: 0.5 * c, Duration: 5 * time.Second},
		{Name: "5x", Rate: 5 * c, Duration: 6 * time.Second},
		{Name: "0.5x-b", Rate: 0.5 * c, Duration: 5 * time.Second},
	}
}

const (
	iNormal = 0
	i2x     = 1
	i5x     = 3
)

type checkRun struct {
	prot                  string
	res                   *Result
	run                   report.Run
	good2x, good5x        float64 // goodput, req/s
	rec2x, rec5x          float64 // server recovery, s (-1: never)
	late                  float64 // share of handler runs after the client's deadline
	rejNormal             int64   // rejected + throttled at 0.7x
	attempts2x, attempts5 float64 // attempts ÷ offered
}

func TestLoopback(t *testing.T) {
	repeat := 3
	if v, err := strconv.Atoi(os.Getenv("LOOPBACK_REPEAT")); err == nil && v > 0 {
		repeat = v
	}
	works := []time.Duration{time.Millisecond, 20 * time.Millisecond}
	if v := os.Getenv("LOOPBACK_WORK"); v != "" {
		works = nil
		for _, s := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				t.Fatalf("LOOPBACK_WORK: %v", err)
			}
			works = append(works, d)
		}
	}
	for _, w := range works {
		t.Run(w.String(), func(t *testing.T) { checkLoopback(t, w, repeat) })
	}
}

func checkLoopback(t *testing.T, work time.Duration, repeat int) {
	ctx := context.Background()
	capRPS, ready, err := Capacity(ctx, work, 8, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("work %v (%d iterations), backend GOMAXPROCS=%d %s; closed-loop capacity %.0f req/s",
		work, ready.Work.Iterations, ready.GOMAXPROCS, ready.Pinned, capRPS)
	phases := loopbackPhases(capRPS)
	var runs []checkRun
	for i := 0; i < repeat; i++ {
		for _, prot := range []string{backend.None, backend.Levee} {
			cfg := Config{
				Name: fmt.Sprintf("%s-%d", prot, i+1), Protection: prot, Client: Naive,
				Work: work, Timeout: time.Second, Retries: 2, Phases: phases, Drain: 3500 * time.Millisecond,
			}
			res, err := Run(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			run := res.Run("")
			ph := res.Load.Phases
			r := checkRun{prot: prot, res: res, run: run,
				good2x: run.Phases[i2x].GoodputRPS, good5x: run.Phases[i5x].GoodputRPS,
				late:       run.WastedWorkShare,
				rejNormal:  ph[iNormal].Rejected + ph[iNormal].Throttled,
				attempts2x: float64(ph[i2x].Attempted) / float64(max(ph[i2x].Offered, 1)),
				attempts5:  float64(ph[i5x].Attempted) / float64(max(ph[i5x].Offered, 1)),
			}
			r.rec2x, r.rec5x = -1, -1
			if s, ok := run.ServerRecoveryAfter(phases[i2x].Name, 2); ok {
				r.rec2x = s
			}
			if s, ok := run.ServerRecoveryAfter(phases[i5x].Name, 2); ok {
				r.rec5x = s
			}
			name, share := backend.Dominant(res.Server.ShedBy)
			t.Logf("%-8s goodput 2x %6.1f 5x %6.1f req/s | attempts/offered 2x %.2f 5x %.2f | server recovery 2x %4.1fs 5x %4.1fs | late runs %5.1f%% | rejected at 0.7x %d | shed by %s (%.0f%%) | gen errors %d, max lag %v | backend timers stalled %.1fs (longest %v), threads waited %.1fs for a CPU",
				cfg.Name, r.good2x, r.good5x, r.attempts2x, r.attempts5, r.rec2x, r.rec5x, 100*r.late, r.rejNormal,
				name, 100*share, res.Load.GenErrors, res.Load.MaxLag.Round(time.Millisecond),
				res.Server.Stalled.Seconds(), res.Server.MaxStall.Round(time.Millisecond), res.Server.RunDelay.Seconds())
			runs = append(runs, r)
		}
	}

	// The reference: the unprotected peak measured in this run, the higher
	// of the closed loop and the best second of the unprotected runs.
	peak := capRPS
	for _, r := range runs {
		if r.prot == backend.None {
			peak = max(peak, report.BestSecond(r.run.Series.Instances[0].ServedRPS, r.run.Series.BucketS))
		}
	}
	pick := func(prot string, f func(checkRun) float64) (med, lo, hi float64) {
		var xs []float64
		for _, r := range runs {
			if r.prot == prot {
				xs = append(xs, f(r))
			}
		}
		return report.Median(xs)
	}
	never := func(x float64) float64 {
		if x < 0 {
			return 1e9
		}
		return x
	}
	type row struct {
		label string
		f     func(checkRun) float64
	}
	rows := []row{
		{"goodput 2x ÷ peak", func(r checkRun) float64 { return r.good2x / peak }},
		{"goodput 5x ÷ peak", func(r checkRun) float64 { return r.good5x / peak }},
		{"server recovery after 2x (s)", func(r checkRun) float64 { return never(r.rec2x) }},
		{"server recovery after 5x (s)", func(r checkRun) float64 { return never(r.rec5x) }},
		{"handler runs after deadline", func(r checkRun) float64 { return r.late }},
		{"rejected at 0.7x", func(r checkRun) float64 { return float64(r.rejNormal) }},
		{"attempts ÷ offered at 5x", func(r checkRun) float64 { return r.attempts5 }},
	}
	t.Logf("work %v, peak %.0f req/s, medians of %d alternated runs [min–max] (1e9 = never):", work, peak, repeat)
	t.Logf("%-30s %-26s %-26s", "", "unprotected", "levee")
	for _, rw := range rows {
		a, alo, ahi := pick(backend.None, rw.f)
		b, blo, bhi := pick(backend.Levee, rw.f)
		t.Logf("%-30s %-26s %-26s", rw.label, fmt.Sprintf("%.3g [%.3g–%.3g]", a, alo, ahi), fmt.Sprintf("%.3g [%.3g–%.3g]", b, blo, bhi))
	}
	shed := map[string]float64{}
	for _, r := range runs {
		for k, v := range r.res.Server.ShedBy {
			shed[k] += v
		}
	}
	name, share := backend.Dominant(shed)
	t.Logf("shedding driven by %s (%.0f%% of shedding time; all: %v)", name, 100*share, shed)

	g2, _, _ := pick(backend.Levee, rows[0].f)
	g5, _, _ := pick(backend.Levee, rows[1].f)
	r2, _, _ := pick(backend.Levee, rows[2].f)
	r5, _, _ := pick(backend.Levee, rows[3].f)
	late, _, _ := pick(backend.Levee, rows[4].f)
	rej, _, _ := pick(backend.Levee, rows[5].f)
	if g2 < 0.8 {
		t.Errorf("levee goodput at 2x = %.2f of the unprotected peak, want ≥ 0.8", g2)
	}
	if g5 < 0.7 {
		t.Errorf("levee goodput at 5x = %.2f of the unprotected peak, want ≥ 0.7", g5)
	}
	if r2 > 2 || r5 > 2 {
		t.Errorf("levee server recovery after 2x %.1fs, after 5x %.1fs, want ≤ 2s", r2, r5)
	}
	if late > 0.05 {
		t.Errorf("levee handler runs after the client's deadline = %.1f%%, want ≤ 5%%", 100*late)
	}
	if rej > 0 {
		t.Errorf("levee rejected %v requests at 0.7x, want 0", rej)
	}
}
