package goodput

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback/lab"
	"github.com/levee-dev/levee/tools/loopback/slowdep"
	"github.com/levee-dev/levee/tools/report"
)

// TestShapes compares levee with its peers on three shapes of service
// beyond the CPU-bound one of TestGoodput, each protection in fresh
// processes, alternated, medians of LEVEE_BENCH_REPEAT (default 3) runs,
// and writes shapes.md for cmd/benchreport:
//
//   - a slow dependency (package slowdep: 200 µs of CPU and a pool of 8
//     connections to a dependency going 5 → 50 → 5 ms, 0.7 of the pool
//     offered);
//   - long requests: 20 ms of CPU each, at 2× and 5×, with the p50 against
//     the p50 at 0.2×;
//   - mixed criticality: 1 ms requests at 2×, split evenly over the four
//     criticalities from callers levee trusts (the peers ignore
//     criticality), beside levee with the same load and no criticality.
//
// About 25 minutes on a quiet 2-CPU machine:
//
//	cd bench && LEVEE_BENCH_SHAPES=1 GOWORK=off go test -run TestShapes -v -timeout 60m ./goodput
//
// LEVEE_BENCH_SHAPES_SHORT=1 runs one round of short phases (about 4
// minutes), to check the harness.
func TestShapes(t *testing.T) {
	if os.Getenv("LEVEE_BENCH_SHAPES") != "1" {
		t.Skip("loopback shapes comparison: set LEVEE_BENCH_SHAPES=1 (about 25 minutes, 2 CPUs)")
	}
	repeat, scale := 3, 1.0
	sd := slowdep.Schedule{Fast: 10 * time.Second, Slow: 20 * time.Second, After: 10 * time.Second}
	if v, err := strconv.Atoi(os.Getenv("LEVEE_BENCH_REPEAT")); err == nil && v > 0 {
		repeat = v
	}
	if os.Getenv("LEVEE_BENCH_SHAPES_SHORT") == "1" {
		repeat, scale = 1, 0.3
		sd = slowdep.Schedule{Fast: 3 * time.Second, Slow: 6 * time.Second, After: 4 * time.Second}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	started := time.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "Medians of %d alternated runs (lowest–highest in parentheses when they differ).\n\n", repeat)
	b.WriteString(slowDependency(ctx, t, sd, repeat))
	b.WriteString("\n")
	b.WriteString(longRequests(ctx, t, repeat, scale))
	b.WriteString("\n")
	b.WriteString(mixedCriticality(ctx, t, repeat, scale))
	t.Logf("shapes comparison took %v", time.Since(started).Round(time.Second))
	if err := os.WriteFile("shapes.md", []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}

// cell renders the median of xs with its spread; "–" for none.
func cell(xs []float64, format string) string {
	var ok []float64
	for _, x := range xs {
		if !math.IsNaN(x) {
			ok = append(ok, x)
		}
	}
	if len(ok) == 0 {
		return "–"
	}
	m, lo, hi := report.Median(ok)
	s := fmt.Sprintf(format, m)
	if l, h := fmt.Sprintf(format, lo), fmt.Sprintf(format, hi); l != h {
		s += " (" + l + "–" + h + ")"
	}
	return s
}

// ratioCell renders levee's figure ÷ this protection's, the median of
// the repetitions' ratios; "∞" when this protection had nothing in every
// repetition where levee had some.
func ratioCell(xs []float64) string {
	var finite []float64
	inf := false
	for _, x := range xs {
		switch {
		case math.IsInf(x, 1):
			inf = true
		case !math.IsNaN(x) && !math.IsInf(x, 0):
			finite = append(finite, x)
		}
	}
	if len(finite) == 0 && inf {
		return "∞"
	}
	return cell(finite, "%.2f")
}

func slowDependency(ctx context.Context, t *testing.T, s slowdep.Schedule, repeat int) string {
	order := []string{slowdep.Levee, slowdep.None, FailsafeDep, BBRDep}
	labels := map[string]string{slowdep.Levee: "**levee** (defaults)", slowdep.None: "nothing", FailsafeDep: "failsafe-go (docs)", BBRDep: "aegis BBR (docs)"}
	var lines []slowdep.Line
	for i := range repeat {
		o := append([]string(nil), order...)
		if i%2 == 1 {
			for a, z := 0, len(o)-1; a < z; a, z = a+1, z-1 {
				o[a], o[z] = o[z], o[a]
			}
		}
		for _, prot := range o {
			l, err := slowdep.Run(ctx, prot, s, fmt.Sprintf("%s-%d", prot, i+1), progress(t, prot))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%-16s before %.2f | slow %.2f of the pool, %.1f%% late, p99 %v | recovery %.1fs, after %.2f",
				l.Run.Name, l.FastGoodput, l.SlowGoodput, 100*l.SlowLate, l.SlowP99.Round(time.Millisecond), l.Recovery, l.AfterGoodput)
			lines = append(lines, l)
		}
	}
	ofLine := func(prot string, f func(slowdep.Line) float64) []float64 {
		var xs []float64
		for _, l := range lines {
			if l.Protection == prot {
				xs = append(xs, f(l))
			}
		}
		return xs
	}
	slowGood := func(l slowdep.Line) float64 { return l.SlowGoodput }
	var b strings.Builder
	fmt.Fprintf(&b, "**Slow dependency** (200 µs of CPU, a pool of 8 connections; the dependency answers in 5 ms for %v, 50 ms for %v, 5 ms again for %v; %.0f req/s offered throughout, 0.7 of what the pool serves at 5 ms; the pool serves %.0f req/s at 50 ms):\n\n",
		s.Fast, s.Slow, s.After, slowdep.Offered, slowdep.Capacity)
	b.WriteString("| protection | served before | goodput while slow ÷ pool capacity | levee ÷ this | handler runs after their deadline (slow) | p99 while slow | recovery after | goodput from 2 s after ÷ offered |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, prot := range order {
		ratio := "–"
		if prot != slowdep.Levee {
			ratio = ratioCell(pairs(ofLine(slowdep.Levee, slowGood), ofLine(prot, slowGood)))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", labels[prot],
			cell(ofLine(prot, func(l slowdep.Line) float64 { return l.FastGoodput }), "%.2f"),
			cell(ofLine(prot, slowGood), "%.2f"), ratio,
			cell(ofLine(prot, func(l slowdep.Line) float64 { return 100 * l.SlowLate }), "%.0f%%"),
			cell(ofLine(prot, func(l slowdep.Line) float64 { return ms(l.SlowP99) }), "%.0f ms"),
			cell(ofLine(prot, func(l slowdep.Line) float64 { return never(l.Recovery) }), "%.1f s"),
			cell(ofLine(prot, func(l slowdep.Line) float64 { return l.AfterGoodput }), "%.2f"))
	}
	return b.String()
}

// never maps a recovery that did not happen (< 0) to NaN, shown as "–".
func never(s float64) float64 {
	if s < 0 || s >= lab.Never {
		return math.NaN()
	}
	return s
}

// peers are the protections of the long-request and mixed-criticality
// comparisons, levee first.
var peers = []string{levee, none, Failsafe, FailsafeTuned, BBR}

// variants returns the Lab variants of prots with mix.
func variants(prots []string, mix load.Mix) []lab.Variant {
	var vs []lab.Variant
	for _, p := range prots {
		vs = append(vs, lab.Variant{Name: p, Protection: p, Mix: mix})
	}
	return vs
}

func execute(ctx context.Context, t *testing.T, l *lab.Lab, repeat int, scale float64) []lab.Run {
	runs, err := l.Execute(ctx, lab.Options{Repeat: repeat, Scale: scale, Logf: t.Logf,
		Progress: func(run string, p load.Progress) {
			if os.Getenv("LEVEE_BENCH_PROGRESS") == "1" {
				t.Logf("%s %s", run, p)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if bad := lab.Clean(runs); bad != "" {
		t.Errorf("a backend misbehaved:\n%s", bad)
	}
	return runs
}

func longRequests(ctx context.Context, t *testing.T, repeat int, scale float64) string {
	l := &lab.Lab{
		Name: "long requests", Setup: "20 ms of CPU per request, every request CRITICAL from one tenant",
		Work: 20 * time.Millisecond,
		Steps: []lab.Step{
			{Name: "0.2x", Load: 0.2, Duration: 4 * time.Second},
			{Name: "2x", Load: 2, Duration: 8 * time.Second},
			{Name: "0.5x-a", Load: 0.5, Duration: 5 * time.Second},
			{Name: "5x", Load: 5, Duration: 8 * time.Second},
			{Name: "0.5x-b", Load: 0.5, Duration: 5 * time.Second},
		},
		Overload: "2x",
		Variants: variants(peers, load.Mix{}),
	}
	runs := execute(ctx, t, l, repeat, scale)
	var b strings.Builder
	fmt.Fprintf(&b, "**Long requests** (20 ms of CPU per request, closed-loop capacity %s req/s; unloaded: the p50 at 0.2×):\n\n", capacity(runs))
	b.WriteString("| load | protection | goodput ÷ capacity | levee ÷ this | p50 ÷ unloaded p50 | p99 of successes | handler runs after their deadline | recovery at 0.5× |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, over := range []string{"2x", "5x"} {
		good := lab.Goodput(over)
		for _, p := range peers {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", strings.Replace(over, "x", "×", 1), labels[p],
				cell(of(runs, p, good), "%.2f"), vsLevee(runs, p, good),
				cell(of(runs, p, lab.P50Ratio(over, "0.2x")), "%.1f"),
				cell(of(runs, p, p99(over)), "%.0f ms"),
				cell(of(runs, p, func(r lab.Run) float64 { return 100 * lab.Wasted(r) }), "%.0f%%"),
				cell(of(runs, p, func(r lab.Run) float64 { return never(lab.Recovery(over)(r)) }), "%.1f s"))
		}
	}
	return b.String()
}

func mixedCriticality(ctx context.Context, t *testing.T, repeat int, scale float64) string {
	const noLevels = "levee-no-levels"
	ladder := lab.Ladder()
	var four load.Mix
	for _, v := range ladder.Variants {
		if v.Name == lab.FourLevels {
			four = v.Mix
		}
	}
	vs := variants(peers, four)
	vs = append(vs, lab.Variant{Name: noLevels, Protection: levee, Mix: load.Mix{Tenants: four.Tenants}})
	ladder.Variants, ladder.Checks = vs, nil
	runs := execute(ctx, t, ladder, repeat, scale)
	over := ladder.Overload
	good := lab.Goodput(over)
	var b strings.Builder
	fmt.Fprintf(&b, "**Mixed criticality** (1 ms of CPU per request, 2× the closed-loop capacity of %s req/s split evenly over the four criticalities; levee trusts the callers (127.0.0.0/8) and honours Levee-Criticality, one tenant, the id \"lab\" in Levee-Tenant; the peers ignore criticality; served = goodput ÷ offered of each level):\n\n", capacity(runs))
	b.WriteString("| protection | goodput ÷ capacity | levee ÷ this | CRITICAL_PLUS | CRITICAL | SHEDDABLE_PLUS | SHEDDABLE | recovery at 0.5× |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	rowLabels := map[string]string{levee: "**levee** (trusting 127.0.0.0/8)", noLevels: "levee, the same load without criticality"}
	for _, p := range append(append([]string(nil), peers...), noLevels) {
		lbl := labels[p]
		if l, ok := rowLabels[p]; ok {
			lbl = l
		}
		fmt.Fprintf(&b, "| %s | %s | %s |", lbl, cell(of(runs, p, good), "%.2f"), vsLevee(runs, p, good))
		for _, c := range []string{"CRITICAL_PLUS", "CRITICAL", "SHEDDABLE_PLUS", "SHEDDABLE"} {
			fmt.Fprintf(&b, " %s |", cell(of(runs, p, func(r lab.Run) float64 { return 100 * lab.ClassServed(over, c)(r) }), "%.0f%%"))
		}
		fmt.Fprintf(&b, " %s |\n", cell(of(runs, p, func(r lab.Run) float64 { return never(lab.Recovery(over)(r)) }), "%.1f s"))
	}
	return b.String()
}

// of returns f of every run of variant.
func of(runs []lab.Run, variant string, f func(lab.Run) float64) []float64 {
	var xs []float64
	for _, r := range runs {
		if r.Variant == variant {
			xs = append(xs, f(r))
		}
	}
	return xs
}

// vsLevee renders levee's f ÷ variant's, paired by repetition
// (ratioCell); "–" for levee itself.
func vsLevee(runs []lab.Run, variant string, f func(lab.Run) float64) string {
	if variant == levee {
		return "–"
	}
	return ratioCell(pairs(of(runs, levee, f), of(runs, variant, f)))
}

// pairs returns lv[i] ÷ x[i] for the repetitions both have.
func pairs(lv, x []float64) []float64 {
	var out []float64
	for i := range min(len(lv), len(x)) {
		out = append(out, lv[i]/x[i])
	}
	return out
}

// p99 returns the p99 of the successes of phase, milliseconds (NaN when
// nothing succeeded).
func p99(phase string) func(lab.Run) float64 {
	return func(r lab.Run) float64 {
		p, ok := r.Report.Phase(phase)
		if !ok || !(p.Latency.P99 > 0) {
			return math.NaN()
		}
		return 1000 * p.Latency.P99
	}
}

// capacity renders the closed-loop capacity the runs were measured
// against.
func capacity(runs []lab.Run) string {
	if len(runs) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", runs[0].Capacity)
}
