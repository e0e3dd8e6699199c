package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
	"github.com/levee-dev/levee/tools/report"
)

type demoCmd struct {
	Quick  bool          `help:"Short run (under 30 s)."`
	JSON   bool          `name:"json" help:"Print the results as JSON on stdout; progress goes to stderr."`
	HTML   string        `name:"html" default:"levee-demo.html" placeholder:"FILE" help:"Write the charts to FILE (default levee-demo.html; \"\" to skip)."`
	Repeat int           `default:"1" help:"Alternate unprotected and levee runs N times each; the table shows medians and spread."`
	Work   time.Duration `default:"2ms" help:"CPU time the backend burns per request."`
	Trace  string        `name:"trace" placeholder:"FILE" help:"Write the levee backend's controller snapshot every 50 ms to FILE as JSON lines (with --repeat, FILE-2, FILE-3 … for the later runs)."`
}

// tracePath is the trace file of the levee run i (from 1) of a demo run
// with --trace file: file itself for the first, then the run's number
// before the extension.
func tracePath(file string, i int) string {
	if file == "" || i == 1 {
		return file
	}
	ext := filepath.Ext(file)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(file, ext), i, ext)
}

// hijack runs a re-executed child role (backend or load generator) when the
// process was started as one, and reports whether it did.
func hijack() bool { return loopback.Hijack() }

// demoPlan is the schedule of one run, in multiples of the capacity.
type demoPlan struct {
	normal, spike, after time.Duration
	drain                time.Duration
	capacity             time.Duration // closed-loop measurement
}

var (
	planDefault = demoPlan{normal: 5 * time.Second, spike: 10 * time.Second, after: 10 * time.Second, drain: 3500 * time.Millisecond, capacity: 2 * time.Second}
	planQuick   = demoPlan{normal: 2 * time.Second, spike: 5500 * time.Millisecond, after: 4500 * time.Millisecond, drain: 1500 * time.Millisecond, capacity: 1500 * time.Millisecond}
)

// Load multiples of the measured capacity.
const (
	normalX = 0.7
	spikeX  = 3.0
	afterX  = 0.7
)

// Naive clients: 1 s per attempt, 2 immediate retries.
const (
	naiveTimeout = time.Second
	naiveRetries = 2
)

// demoRun is one run of the demo: its report in the one schema, and the
// backend's own diagnostics for the table (which signal drove shedding,
// how long its timers stalled).
type demoRun struct {
	report.Run
	server backend.Report
}

func (d demoCmd) Run(e *env) error {
	if d.Repeat < 1 || d.Repeat > 100 {
		return usagef("demo: --repeat %d out of [1, 100]", d.Repeat)
	}
	if d.Work <= 0 || d.Work > time.Second {
		return usagef("demo: --work %v out of (0, 1s]", d.Work)
	}
	// A trace file that cannot be written fails now, not after the
	// first unprotected run.
	for i := 1; d.Trace != "" && i <= d.Repeat; i++ {
		f, err := os.Create(tracePath(d.Trace, i))
		if err != nil {
			return usagef("demo: --trace: %v", err)
		}
		f.Close()
	}
	plan := planDefault
	if d.Quick {
		plan = planQuick
	}
	ctx := e.ctx
	// Progress and notes go to stderr when stdout carries JSON.
	log := e.stdout
	if d.JSON {
		log = e.stderr
	}

	pl := loopback.Place()
	fmt.Fprintf(log, "levee demo: backend GOMAXPROCS=1 on %s, load generator on %s, %v of CPU per request\n",
		cpuName(pl.Backend), cpuName(pl.Loadgen), d.Work)
	capRPS, _, err := loopback.Capacity(ctx, d.Work, 8, plan.capacity)
	if err != nil {
		return fmt.Errorf("demo: measuring capacity: %w", err)
	}
	fmt.Fprintf(log, "capacity (unprotected peak: best second of a closed loop): %.0f requests/s\n", capRPS)

	phases := []load.Phase{
		{Name: "normal", Rate: normalX * capRPS, Duration: plan.normal},
		{Name: "spike", Rate: spikeX * capRPS, Duration: plan.spike},
		{Name: "after", Rate: afterX * capRPS, Duration: plan.after},
	}
	var runs []demoRun
	for i := 1; i <= d.Repeat; i++ {
		for _, prot := range []string{backend.None, backend.Levee} {
			cfg := loopback.Config{
				Name:       fmt.Sprintf("%s-%d", prot, i),
				Protection: prot,
				Client:     loopback.Naive,
				Work:       d.Work,
				Timeout:    naiveTimeout,
				Retries:    naiveRetries,
				Phases:     phases,
				Drain:      plan.drain,
			}
			if prot == backend.Levee {
				cfg.Client = loopback.Levee
				cfg.SnapshotTrace = tracePath(d.Trace, i)
			}
			cfg.Progress = func(p load.Progress) {
				fmt.Fprintf(log, "  %-8s %-6s t=%4.1fs  offered %5.0f/s  attempted %5.0f/s  goodput %5.0f/s  rejected %5.0f/s  throttled %5.0f/s  p99 %s\n",
					cfg.Name, p.Phase, p.Elapsed.Seconds(), p.Offered, p.Attempted, p.Goodput, p.Rejected, p.Throttled, fmtDur(p.P99))
			}
			res, err := loopback.Run(ctx, cfg)
			if err != nil {
				return fmt.Errorf("demo: run %s: %w", cfg.Name, err)
			}
			r := demoRun{Run: res.Run("spike"), server: res.Server}
			if r.server.TraceErr != "" {
				fmt.Fprintf(e.stderr, "levee demo: %s: the trace stopped early: %s\n", cfg.Name, r.server.TraceErr)
			}
			r.CapacityRPS = report.Round(capRPS)
			if !d.JSON {
				fmt.Fprintf(log, "  %s server: %s\n", cfg.Name, serverLine(r))
			}
			runs = append(runs, r)
		}
	}

	rep := demoReport(capRPS, d.Work, plan, runs)
	var table strings.Builder
	writeTable(&table, rep.CapacityRPS, runs, d.Repeat)
	if d.JSON {
		if err := writeJSON(e.stdout, rep); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(log)
		fmt.Fprint(log, table.String())
	}
	if d.HTML != "" {
		if err := writeDemoHTML(d.HTML, rep, runs, table.String()); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		fmt.Fprintf(log, "charts: %s\n", d.HTML)
	}
	return nil
}

// demoReport is the demo's report in the one schema.
func demoReport(capRPS float64, work time.Duration, plan demoPlan, runs []demoRun) *report.Report {
	rep := &report.Report{
		Tool:     "demo",
		Scenario: "loopback overload",
		Description: fmt.Sprintf("A CPU-bound HTTP backend (GOMAXPROCS=1, pinned to one CPU, %v of CPU per request, capacity %.0f req/s measured closed-loop) "+
			"driven open-loop from a second process on the other CPU: normal %.1f× → spike %.1f× → after %.1f× of capacity. "+
			"Unprotected: naive clients (%v per attempt, %d immediate retries, no budget, no throttling), no shedding on the server. "+
			"levee: leveehttp.NewHandler with admit and the default pressure signals, clients through leveehttp.NewTransport, all defaults. "+
			"Latency is measured from each request's scheduled time.",
			work, capRPS, normalX, spikeX, afterX, naiveTimeout, naiveRetries),
		DurationS:   report.Round((plan.normal + plan.spike + plan.after).Seconds()),
		CapacityRPS: report.Round(capRPS),
		Trigger:     "spike",
	}
	for _, r := range runs {
		rep.Runs = append(rep.Runs, r.Run)
		if r.GeneratorErrors > 0 || r.MaxLagS > 0.1 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d load generator errors, generator lagged up to %.0f ms behind schedule",
				r.Name, r.GeneratorErrors, 1000*r.MaxLagS))
		}
	}
	return rep
}

// serverLine summarises what the backend did in a run.
func serverLine(r demoRun) string {
	in := r.Instances[0]
	line := fmt.Sprintf("%d handler runs finished after their client's deadline (%.0f%% of all), %d answered in time, %d rejected",
		in.Wasted, 100*r.WastedWorkShare, in.Served, in.Rejected)
	if len(in.RejectedBy) > 0 {
		line += fmt.Sprintf(" %v", in.RejectedBy)
	}
	if name, share := backend.Dominant(r.server.ShedBy); name != "" {
		line += fmt.Sprintf(", shedding driven by %s (%.0f%%)", name, 100*share)
	}
	if n := r.server.ConnsGone; n > 0 {
		line += fmt.Sprintf("; %d connections closed unread, their client gone before the accept", n)
	}
	line += fmt.Sprintf("; used %.1fs of CPU, waited %.1fs for one", r.server.CPU.Seconds(), r.server.RunDelay.Seconds())
	if r.server.MaxStall > 0 {
		line += fmt.Sprintf("; its timers ran late for %.1fs (longest gap %v)", r.server.Stalled.Seconds(), r.server.MaxStall.Round(time.Millisecond))
	}
	return line
}

func cpuName(cpu int) string {
	if cpu < 0 {
		return "any CPU (unpinned)"
	}
	return fmt.Sprintf("cpu%d", cpu)
}

func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(time.Millisecond).String()
}

// column gathers one protection's runs for the table.
type column struct {
	runs []demoRun
}

func (c column) stat(f func(demoRun) (float64, bool)) string {
	var xs []float64
	missing := 0
	for _, r := range c.runs {
		if v, ok := f(r); ok {
			xs = append(xs, v)
		} else {
			missing++
		}
	}
	if len(xs) == 0 {
		return "never"
	}
	med, lo, hi := report.Median(xs)
	s := num(med)
	if len(c.runs) > 1 {
		s += " [" + num(lo) + "–" + num(hi) + "]"
	}
	if missing > 0 {
		s += fmt.Sprintf(" (never in %d)", missing)
	}
	return s
}

func num(x float64) string {
	switch {
	case x == 0:
		return "0"
	case x >= 100:
		return fmt.Sprintf("%.0f", x)
	case x >= 10:
		return fmt.Sprintf("%.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

func phase(r demoRun, name string) report.Phase {
	p, _ := r.Phase(name)
	return p
}

// optional turns a figure that may be missing into a table cell's value.
func optional(x *float64) (float64, bool) {
	if x == nil {
		return 0, false
	}
	return *x, true
}

// serverRecovery and serverHealthy are report.Run's server-side recovery
// figures after the spike, over a 2 s hold.
func serverRecovery(r demoRun) (float64, bool) { return r.ServerRecoveryAfter("spike", 2) }
func serverHealthy(r demoRun) (float64, bool)  { return r.ServerHealthyAfter("spike", 2) }

func writeTable(w io.Writer, capRPS float64, runs []demoRun, repeat int) {
	cols := map[string]*column{backend.None: {}, backend.Levee: {}}
	for _, r := range runs {
		cols[r.Protection].runs = append(cols[r.Protection].runs, r)
	}
	none, lev := cols[backend.None], cols[backend.Levee]
	type row struct {
		label string
		f     func(demoRun) (float64, bool)
	}
	pf := func(name string, g func(report.Phase) float64) func(demoRun) (float64, bool) {
		return func(r demoRun) (float64, bool) { return g(phase(r, name)), true }
	}
	gp := func(p report.Phase) float64 { return p.GoodputRPS }
	rows := []row{
		{"offered normal / spike / after (req/s)", nil},
		{"goodput normal (req/s)", pf("normal", gp)},
		{"goodput spike (req/s)", pf("spike", gp)},
		{"goodput after (req/s)", pf("after", gp)},
		{"spike goodput ÷ capacity", pf("spike", func(p report.Phase) float64 { return p.GoodputRPS / capRPS })},
		{"p50 / p99 spike (ms)", nil},
		{"p50 / p99 after (ms)", nil},
		{"attempts ÷ offered, spike", pf("spike", func(p report.Phase) float64 { return ratio(p.AttemptedRPS, p.OfferedRPS) })},
		{"attempts ÷ offered, after", pf("after", func(p report.Phase) float64 { return ratio(p.AttemptedRPS, p.OfferedRPS) })},
		{"rejected normal (req/s)", pf("normal", func(p report.Phase) float64 { return p.RejectedRPS })},
		{"rejected + throttled spike (req/s)", pf("spike", func(p report.Phase) float64 { return p.RejectedRPS + p.ThrottledRPS })},
		{"failed spike (req/s)", pf("spike", func(p report.Phase) float64 { return p.FailedRPS })},
		{"client recovery after spike (s)", func(r demoRun) (float64, bool) { return optional(r.RecoveryS) }},
		{"server serves 95% of after load (s)", serverRecovery},
		{"server answers 95% of arrivals ok (s)", serverHealthy},
		{"handler runs after client deadline", func(r demoRun) (float64, bool) { return 100 * r.WastedWorkShare, true }},
		{"shedding driven by", nil},
		{"backend timer goroutines stalled (s)", func(r demoRun) (float64, bool) { return r.server.Stalled.Seconds(), true }},
	}
	title := "median of 1 run each"
	if repeat > 1 {
		title = fmt.Sprintf("medians of %d alternated runs each, [min–max]", repeat)
	}
	fmt.Fprintf(w, "capacity %.0f req/s; phases normal %.1f× → spike %.1f× → after %.1f×; %s\n\n", capRPS, normalX, spikeX, afterX, title)
	fmt.Fprintf(w, "%-40s  %-26s  %-26s\n", "", "unprotected", "levee")
	for _, r := range rows {
		var a, b string
		switch r.label {
		case "offered normal / spike / after (req/s)":
			a = offeredLine(none)
			b = offeredLine(lev)
		case "p50 / p99 spike (ms)", "p50 / p99 after (ms)":
			name := "spike"
			if strings.Contains(r.label, "after") {
				name = "after"
			}
			a = latLine(none, name)
			b = latLine(lev, name)
		case "shedding driven by":
			a, b = "-", shedLine(lev)
		default:
			a, b = none.stat(r.f), lev.stat(r.f)
		}
		if r.label == "handler runs after client deadline" {
			a, b = a+" %", b+" %"
		}
		fmt.Fprintf(w, "%-40s  %-26s  %-26s\n", r.label, a, b)
	}
	fmt.Fprintln(w)
	if ps, ok := peakNone(none); ok {
		fmt.Fprintf(w, "unprotected peak in-time 2xx over any second: %s req/s (capacity measured closed-loop: %.0f)\n", num(ps), capRPS)
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func offeredLine(c *column) string {
	if len(c.runs) == 0 {
		return "-"
	}
	r := c.runs[0]
	return fmt.Sprintf("%.0f / %.0f / %.0f", phase(r, "normal").OfferedRPS, phase(r, "spike").OfferedRPS, phase(r, "after").OfferedRPS)
}

func latLine(c *column, name string) string {
	var p50, p99 []float64
	for _, r := range c.runs {
		p := phase(r, name)
		if p.GoodputRPS == 0 {
			continue
		}
		p50 = append(p50, 1000*p.Latency.P50)
		p99 = append(p99, 1000*p.Latency.P99)
	}
	if len(p50) == 0 {
		return "no successes"
	}
	a, _, _ := report.Median(p50)
	b, _, _ := report.Median(p99)
	return num(a) + " / " + num(b)
}

func shedLine(c *column) string {
	total := map[string]float64{}
	for _, r := range c.runs {
		for k, v := range r.server.ShedBy {
			total[k] += v
		}
	}
	name, share := backend.Dominant(total)
	if name == "" {
		return "nothing shed"
	}
	return fmt.Sprintf("%s (%.0f%% of shedding time)", name, 100*share)
}

// peakNone is the median over the unprotected runs of the best second of
// answers in time (report.BestSecond).
func peakNone(c *column) (float64, bool) {
	var xs []float64
	for _, r := range c.runs {
		s := r.Series
		if len(s.Instances) > 0 {
			xs = append(xs, report.BestSecond(s.Instances[0].ServedRPS, s.BucketS))
		}
	}
	if len(xs) == 0 {
		return 0, false
	}
	m, _, _ := report.Median(xs)
	return m, true
}
