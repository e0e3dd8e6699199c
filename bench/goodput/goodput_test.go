package goodput

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
	"github.com/levee-dev/levee/tools/loopback/lab"
	"github.com/levee-dev/levee/tools/report"
)

// The schedule, in multiples of the measured capacity: a warm-up every
// protection may learn from, each overload followed by a 0.5× phase in
// which recovery is measured.
func schedule(c float64) []load.Phase {
	return []load.Phase{
		{Name: "0.7x", Rate: 0.7 * c, Duration: 2 * time.Second},
		{Name: "2x", Rate: 2 * c, Duration: 4 * time.Second},
		{Name: "0.5x-a", Rate: 0.5 * c, Duration: recoveryPhase},
		{Name: "5x", Rate: 5 * c, Duration: 4 * time.Second},
		{Name: "0.5x-b", Rate: 0.5 * c, Duration: recoveryPhase},
	}
}

// recoveryPhase is the length of the 0.5× phases; recovery is the time
// from an overload's end until the server answers ≥ 95% of the 0.5× load
// in time over a whole second (report.Run.ServerRecoveryAfter with a 1 s hold),
// so it is measured up to recoveryPhase − 1 s.
const recoveryPhase = 4 * time.Second

// Indexes of the overload phases in schedule.
var overloads = []struct {
	label string
	phase int
}{{"2×", 1}, {"5×", 3}}

// The pure-rejection phase (lab.AnswerCost): every request refused,
// rejectRate of them a second, each protection rejectRounds times.
const (
	rejectRate   = 1500.0
	rejectRounds = 2
)

const (
	none  = backend.None
	levee = backend.Levee
)

// line is one row of the table: one protection, one CPU cost, one load.
type line struct {
	Work       time.Duration `json:"work"`
	Protection string        `json:"protection"`
	Load       string        `json:"load"`
	Goodput    float64       `json:"goodput_rps"`
	P99        time.Duration `json:"p99"`
	Rejected   float64       `json:"rejected_rps"` // server rejections/s during the phase
	Recovery   float64       `json:"recovery_s"`   // -1: not within the 0.5× phase
	CPUBusy    float64       `json:"cpu_busy"`     // backend CPU ÷ wall during the phase
	Late       float64       `json:"late_share"`   // handler runs after their client's deadline (whole run)
	Attempts   float64       `json:"attempts_per_offered"`
	GenErrors  int64         `json:"generator_errors"`
}

type workResult struct {
	Work     time.Duration `json:"work"`
	Closed   float64       `json:"closed_loop_rps"`
	Peak     float64       `json:"peak_rps"`
	Lines    []line        `json:"lines"`
	LeveeLog []string      `json:"levee_log"`
	// Runs are the runs in levee's one report schema.
	Runs []report.Run `json:"runs"`
}

func TestGoodput(t *testing.T) {
	if os.Getenv("LEVEE_BENCH_GOODPUT") != "1" {
		t.Skip("loopback overload comparison: set LEVEE_BENCH_GOODPUT=1 (about 5 minutes, 2 CPUs)")
	}
	works := []time.Duration{time.Millisecond, 20 * time.Millisecond}
	if v := os.Getenv("LEVEE_BENCH_WORK"); v != "" {
		works = nil
		for _, s := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				t.Fatalf("LEVEE_BENCH_WORK: %v", err)
			}
			works = append(works, d)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	started := time.Now()

	rejCost := map[string]float64{}
	if os.Getenv("LEVEE_BENCH_SKIP_REJECT") != "1" {
		rejCost = rejectionCost(ctx, t)
	}

	var results []workResult
	for i, w := range works {
		// Alternate the protections, and their order between the CPU
		// costs, so that a noisy neighbour hurts no one protection alone.
		order := []string{none, levee, BBR, Failsafe, BBRTuned, FailsafeTuned}
		if i%2 == 1 {
			order = []string{levee, none, FailsafeTuned, BBRTuned, Failsafe, BBR}
		}
		if v := os.Getenv("LEVEE_BENCH_PROTECTION"); v != "" {
			only := strings.Split(v, ",")
			order = slices.DeleteFunc(order, func(p string) bool { return !slices.Contains(only, p) })
		}
		results = append(results, runWork(ctx, t, w, order))
	}
	table := render(results, rejCost)
	t.Logf("goodput comparison took %v", time.Since(started).Round(time.Second))
	if err := os.WriteFile("table.md", []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(os.TempDir(), "levee-goodput.json")
	if b, err := json.MarshalIndent(map[string]any{"works": results, "rejection_cost_us": rejCost}, "", " "); err == nil {
		_ = os.WriteFile(dump, b, 0o644)
		t.Logf("raw results: %s", dump)
	}
	t.Log("\n" + table)
}

// rejectionCost measures, for each protection, the backend CPU one
// rejection costs (lab.AnswerCost): the protection is forced to refuse
// everything (levee: its whole stack with a signal stuck at twice its
// target added, backend.LeveeOptions.ForceOverload), and the backend's
// CPU time over the pure-rejection phase, minus its idle CPU, is divided
// by the requests it answered in that time. A request the protection
// still admits (levee's controller lets a few through) costs about what a
// rejection does: the handler burns 1 µs. The protections alternate for
// rejectRounds rounds; noise only adds CPU, so the lowest figure of each
// is kept. Microseconds.
func rejectionCost(ctx context.Context, t *testing.T) map[string]float64 {
	out := map[string]float64{}
	type prot struct {
		name, as string
		o        backend.LeveeOptions
	}
	var order []prot
	for range rejectRounds {
		order = append(order, prot{levee, levee, backend.LeveeOptions{ForceOverload: true}}, prot{BBRReject, BBR, backend.LeveeOptions{}}, prot{FailsafeReject, Failsafe, backend.LeveeOptions{}})
	}
	for _, p := range order {
		c, err := lab.AnswerCost(ctx, p.name, p.o, rejectRate, 1)
		if err != nil || c.Rejected < 0.5*c.Answered {
			t.Logf("%s: sample left out (%v): %.0f answered of which %.0f rejected", p.name, err, c.Answered, c.Rejected)
			continue
		}
		if old, ok := out[p.as]; !ok || c.Micros < old {
			out[p.as] = c.Micros
		}
		t.Logf("%-16s %6.0f rejections, %.0f answered, backend CPU %.3fs (idle %.1f%%): %.1f µs per answer",
			p.name, c.Rejected, c.Answered, c.CPU, 100*c.IdleShare, c.Micros)
	}
	return out
}

// serverSum sums a backend series (100 ms buckets by completion time) over
// [from, to).
func serverSum(res *loopback.Result, xs []int64, from, to time.Time) float64 {
	s := res.Server.Series
	if s.Resolution <= 0 {
		return 0
	}
	i := int(from.Sub(s.Start) / s.Resolution)
	j := int(to.Sub(s.Start) / s.Resolution)
	var n int64
	for k := max(i, 0); k < j && k < len(xs); k++ {
		n += xs[k]
	}
	return float64(n)
}

func runWork(ctx context.Context, t *testing.T, work time.Duration, order []string) workResult {
	// A neighbour busy on the backend's CPU makes a closed loop read low,
	// and every phase is a multiple of it: the best of three short ones.
	var closed float64
	for range 3 {
		c, ready, err := loopback.Capacity(ctx, work, 8, 1500*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("work %v (%d iterations), backend GOMAXPROCS=%d %s: closed-loop capacity %.0f req/s",
			work, ready.Work.Iterations, ready.GOMAXPROCS, ready.Pinned, c)
		closed = max(closed, c)
	}
	wr := workResult{Work: work, Closed: closed, Peak: closed}
	phases := schedule(closed)
	for _, prot := range order {
		res, trace, err := tracedRun(ctx, t, 100*time.Millisecond, loopback.Config{
			Name: prot, Protection: prot, Client: loopback.Naive,
			Work: work, Timeout: time.Second, Retries: 2,
			Phases: phases, Drain: 2 * time.Second,
			Progress: progress(t, prot),
		})
		if err != nil {
			t.Fatalf("%v %s: %v", work, prot, err)
		}
		run := res.Run("")
		run.CapacityRPS = closed
		wr.Runs = append(wr.Runs, run)
		if prot == none {
			wr.Peak = max(wr.Peak, report.BestSecond(run.Series.Instances[0].ServedRPS, run.Series.BucketS))
		}
		for _, o := range overloads {
			ph := res.Load.Phases[o.phase]
			rp := run.Phases[o.phase]
			from, to := res.Load.Start.Add(ph.Offset), res.Load.Start.Add(ph.Offset+ph.Duration)
			cpu, _ := trace.Used(from, to)
			l := line{
				Work: work, Protection: prot, Load: o.label,
				Goodput:   rp.GoodputRPS,
				P99:       time.Duration(rp.Latency.P99 * float64(time.Second)),
				Rejected:  serverSum(res, res.Server.Series.Rejected, from, to) / ph.Duration.Seconds(),
				Recovery:  -1,
				CPUBusy:   cpu / ph.Duration.Seconds(),
				Late:      run.WastedWorkShare,
				Attempts:  ratio(rp.AttemptedRPS, rp.OfferedRPS),
				GenErrors: run.GeneratorErrors,
			}
			if s, ok := run.ServerRecoveryAfter(rp.Name, 1); ok {
				l.Recovery = s
			}
			wr.Lines = append(wr.Lines, l)
			t.Logf("%v %-14s %s: goodput %6.1f req/s, p99 %5.0f ms, rejected %6.1f/s, recovery %4.1fs, backend CPU %3.0f%%, attempts/offered %.2f, late runs %4.1f%%, generator errors %d, max lag %v",
				work, prot, o.label, l.Goodput, ms(l.P99), l.Rejected, l.Recovery, 100*l.CPUBusy, l.Attempts, 100*l.Late, l.GenErrors, res.Load.MaxLag.Round(time.Millisecond))
		}
		if prot == levee {
			wr.LeveeLog = leveeLog(res)
			for _, s := range wr.LeveeLog {
				t.Logf("%v levee: %s", work, s)
			}
		}
	}
	return wr
}

// leveeLog describes what levee's controller did, second by second: the
// highest shed level, the lowest admitted fraction and each signal's
// highest value ÷ target, aligned to the generator's phases.
func leveeLog(res *loopback.Result) []string {
	sr := res.Server
	per := int(time.Second / sr.Series.Resolution)
	shift := int(res.Load.Start.Sub(sr.Series.Start) / sr.Series.Resolution)
	names := make([]string, 0, len(sr.Signals))
	for k := range sr.Signals {
		names = append(names, k)
	}
	slices.Sort(names)
	var out []string
	for _, ph := range res.Load.Phases {
		for s := ph.Offset; s < ph.Offset+ph.Duration; s += time.Second {
			i0 := shift + int(s/sr.Series.Resolution)
			lvl, adm := 0.0, 1.0
			sig := map[string]float64{}
			var ok, rej, runs int64
			for i := i0; i < i0+per && i < len(sr.ShedLevel); i++ {
				if i < 0 {
					continue
				}
				lvl = max(lvl, sr.ShedLevel[i])
				adm = min(adm, sr.AdmitFraction[i])
				for _, n := range names {
					sig[n] = max(sig[n], sr.Signals[n][i])
				}
				ok += sr.Series.OK[i] - sr.Series.OKLate[i]
				rej += sr.Series.Rejected[i]
				runs += sr.Series.Runs[i]
			}
			var b strings.Builder
			fmt.Fprintf(&b, "%-6s t=%2.0fs shed %.2f admit %.2f | in-time 2xx %4d rejected %4d runs %4d |", ph.Name, s.Seconds(), lvl, adm, ok, rej, runs)
			for _, n := range names {
				fmt.Fprintf(&b, " %s %.2f", n, sig[n])
			}
			out = append(out, b.String())
		}
	}
	name, share := backend.Dominant(sr.ShedBy)
	out = append(out, fmt.Sprintf("shedding driven by %q (%.0f%% of shedding time)", name, 100*share))
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

var labels = map[string]string{
	none:          "nothing",
	levee:         "**levee** (defaults)",
	BBR:           "aegis BBR (docs)",
	BBRTuned:      "aegis BBR (tuned)",
	Failsafe:      "failsafe-go (docs)",
	FailsafeTuned: "failsafe-go (tuned)",
}

// rejCostOf maps a protection to the pure-rejection measurement of its
// library (tuning does not change the reject path).
var rejCostOf = map[string]string{levee: levee, BBR: BBR, BBRTuned: BBR, Failsafe: Failsafe, FailsafeTuned: Failsafe}

func render(results []workResult, rejCost map[string]float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| CPU per request | load | protection | goodput ÷ unprotected peak | levee ÷ this | p99 of successes | rejections/s | server CPU per rejection | recovery at 0.5× | server CPU used |\n")
	fmt.Fprintf(&b, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
	var behind []string
	for _, wr := range results {
		for _, o := range overloads {
			var lv line
			hasLevee := false
			for _, l := range wr.Lines {
				if l.Protection == levee && l.Load == o.label {
					lv, hasLevee = l, true
				}
			}
			for _, prot := range []string{levee, none, BBR, BBRTuned, Failsafe, FailsafeTuned} {
				var l line
				found := false
				for _, x := range wr.Lines {
					if x.Protection == prot && x.Load == o.label {
						l, found = x, true
					}
				}
				if !found {
					continue
				}
				ratio := "–"
				if prot != levee && hasLevee {
					if l.Goodput > 0 {
						ratio = fmt.Sprintf("%.2f", lv.Goodput/l.Goodput)
					} else {
						ratio = "∞"
					}
					if !(lv.Goodput > l.Goodput) || worseRecovery(lv, l) {
						behind = append(behind, behindNote(wr.Work, o.label, lv, l))
					}
				}
				p99 := "–"
				if l.P99 > 0 {
					p99 = fmt.Sprintf("%.0f ms", ms(l.P99))
				}
				cost := "–"
				if c, ok := rejCost[rejCostOf[prot]]; ok && prot != none {
					cost = fmt.Sprintf("%.0f µs", c)
				}
				rec := fmt.Sprintf("%.1f s", l.Recovery)
				if l.Recovery < 0 {
					rec = fmt.Sprintf("> %.0f s", (recoveryPhase - time.Second).Seconds())
				}
				fmt.Fprintf(&b, "| %v | %s | %s | %.2f | %s | %s | %.0f | %s | %s | %.0f%% |\n",
					wr.Work, o.label, labels[prot], l.Goodput/wr.Peak, ratio, p99, l.Rejected, cost, rec, 100*l.CPUBusy)
			}
		}
	}
	b.WriteString("\nUnprotected peak (the highest of three closed loops of 8 workers, 1.5 s each, and of the best second of the unprotected run): ")
	for i, wr := range results {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%v per request → %.0f req/s", wr.Work, wr.Peak)
	}
	b.WriteString(".\n")
	if len(behind) == 0 {
		b.WriteString("\nlevee is ahead on every line: more goodput than each peer and than nothing, and no slower recovery.\n")
	} else {
		b.WriteString("\nWhere levee is not ahead in this run:\n\n")
		for _, s := range behind {
			b.WriteString("- " + s + "\n")
		}
	}
	return b.String()
}

// worseRecovery says whether levee recovered more than half a second later
// than l (or not at all when l did).
func worseRecovery(lv, l line) bool {
	if lv.Recovery < 0 {
		return l.Recovery >= 0
	}
	return l.Recovery >= 0 && lv.Recovery > l.Recovery+0.5
}

func behindNote(work time.Duration, load string, lv, l line) string {
	rec := func(x float64) string {
		if x < 0 {
			return "never"
		}
		return fmt.Sprintf("%.1f s", x)
	}
	return fmt.Sprintf("%v, %s, against %s: goodput %.1f vs levee %.1f req/s (levee ÷ this %.2f), recovery %s vs levee %s",
		work, load, labels[l.Protection], l.Goodput, lv.Goodput, lv.Goodput/math.Max(l.Goodput, 1e-9), rec(l.Recovery), rec(lv.Recovery))
}

// progress logs the generator's progress once a second when
// LEVEE_BENCH_PROGRESS=1.
func progress(t *testing.T, name string) func(load.Progress) {
	if os.Getenv("LEVEE_BENCH_PROGRESS") != "1" {
		return nil
	}
	return func(p load.Progress) {
		t.Logf("%s %5.1fs %-6s offered %5.0f attempted %5.0f goodput %5.0f rejected %5.0f failed %5.0f in flight %5d p99 %v",
			name, p.Elapsed.Seconds(), p.Phase, p.Offered, p.Attempted, p.Goodput, p.Rejected, p.Failed, p.InFlight, p.P99.Round(time.Millisecond))
	}
}

// tracedRun runs cfg with fresh children while tracing the backend's CPU
// every period (loopback.Config.TraceCPU). A run whose children fail (a
// shared machine can starve one past its hard time limit) is tried once
// more.
func tracedRun(ctx context.Context, t *testing.T, period time.Duration, cfg loopback.Config) (*loopback.Result, *loopback.CPUTrace, error) {
	cfg.TraceCPU = period
	var err error
	for range 2 {
		var res *loopback.Result
		if res, err = loopback.Run(ctx, cfg); err == nil {
			return res, res.CPU, nil
		}
		t.Logf("%s: %v; running it again", cfg.Name, err)
	}
	return nil, nil, err
}
