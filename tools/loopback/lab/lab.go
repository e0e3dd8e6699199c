package lab

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
	"github.com/levee-dev/levee/tools/report"
)

// Step is one phase of a Lab's schedule: Load times the capacity for
// Duration.
type Step struct {
	Name     string
	Load     float64
	Duration time.Duration
}

// Variant is one configuration a Lab compares: the server's protection
// and who sends the load.
type Variant struct {
	Name       string
	Protection string
	Mix        load.Mix
}

// Lab is a comparison of variants under one schedule, with the figures
// that judge it.
type Lab struct {
	Name string
	// Setup says how the tenant and the criticality of each request are
	// set, for reports.
	Setup string
	// Work is the CPU time per request.
	Work time.Duration
	// Steps is the schedule; Overload names the step whose figures
	// count, after which recovery is measured.
	Steps    []Step
	Overload string
	Variants []Variant
	// Trust lists the networks the Levee backend trusts.
	Trust []string
	// Figures are the rows of the lab's table, one value per run.
	Figures []Figure
	// Checks are the acceptance criteria, each over all the runs.
	Checks []Check
}

// Figure is one row of a Lab's table: a value of one run.
type Figure struct {
	Label string
	Of    func(Run) float64
}

// Check is one acceptance criterion: Value over all the runs of a Lab
// (a median) must lie in [Min, Max].
type Check struct {
	Label    string
	Value    func([]Run) float64
	Min, Max float64
}

// Run is one run of one variant.
type Run struct {
	Variant    string `json:"variant"`
	Repetition int    `json:"repetition"`
	// Capacity is the closed-loop capacity of the unprotected service
	// measured before the runs, requests per second.
	Capacity float64    `json:"capacity_rps"`
	Report   report.Run `json:"run"`
	// Admitted counts what the backend's controller admitted by the
	// criticality it saw (untrusted callers are capped at CRITICAL).
	Admitted map[string]uint64 `json:"admitted,omitempty"`
	// Panics counts the backend's handler panics; Stderr is what it wrote
	// on its stderr.
	Panics int64  `json:"panics"`
	Stderr string `json:"stderr,omitempty"`
}

// Options set how a Lab is run.
type Options struct {
	// Repeat is the number of repetitions of each variant. Default 3.
	Repeat int
	// Scale multiplies every step's duration (at least a second each).
	// Default 1; a harness check uses less.
	Scale float64
	// Progress, if set, receives each run's generator progress.
	Progress func(run string, p load.Progress)
	// Logf, if set, receives a line per run and the capacity.
	Logf func(format string, args ...any)
}

// Schedule returns the lab's phases at capacity c, durations scaled.
func (l *Lab) Schedule(c, scale float64) []load.Phase {
	if !(scale > 0) {
		scale = 1
	}
	out := make([]load.Phase, len(l.Steps))
	for i, s := range l.Steps {
		d := max(time.Second, time.Duration(float64(s.Duration)*scale).Round(100*time.Millisecond))
		out[i] = load.Phase{Name: s.Name, Rate: s.Load * c, Duration: d}
	}
	return out
}

// Capacity measures the unprotected service's capacity at work per
// request: the best of two closed loops of 8 workers for 2 s (a neighbour
// on the backend's CPU makes a closed loop read low).
func Capacity(ctx context.Context, work time.Duration) (float64, error) {
	var best float64
	for range 2 {
		c, _, err := loopback.Capacity(ctx, work, 8, 2*time.Second)
		if err != nil {
			return 0, err
		}
		best = max(best, c)
	}
	return best, nil
}

// Execute measures the capacity and runs every variant of l o.Repeat
// times, alternated, each repetition in the reverse order of the one
// before, each run with fresh processes.
func (l *Lab) Execute(ctx context.Context, o Options) ([]Run, error) {
	if o.Repeat <= 0 {
		o.Repeat = 3
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	c, err := Capacity(ctx, l.Work)
	if err != nil {
		return nil, err
	}
	logf("%s: %v per request, closed-loop capacity %.0f req/s", l.Name, l.Work, c)
	phases := l.Schedule(c, o.Scale)
	var runs []Run
	for rep := range o.Repeat {
		order := append([]Variant(nil), l.Variants...)
		if rep%2 == 1 {
			for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
				order[i], order[j] = order[j], order[i]
			}
		}
		for _, v := range order {
			name := fmt.Sprintf("%s-%d", v.Name, rep+1)
			var progress func(load.Progress)
			if o.Progress != nil {
				progress = func(p load.Progress) { o.Progress(name, p) }
			}
			res, err := loopback.Run(ctx, loopback.Config{
				Name: name, Protection: v.Protection, Client: loopback.Naive,
				Work: l.Work, Timeout: time.Second, Retries: 2,
				Phases: phases, Drain: 3 * time.Second, Progress: progress,
				Mix: v.Mix, Levee: backend.LeveeOptions{Trust: l.Trust},
			})
			if err != nil {
				return runs, fmt.Errorf("%s: %w", name, err)
			}
			run := res.Run("")
			run.CapacityRPS = report.Round(c)
			r := Run{Variant: v.Name, Repetition: rep + 1, Capacity: c, Report: run,
				Admitted: res.Server.AdmittedBy, Panics: res.Server.Panics, Stderr: res.BackendStderr}
			runs = append(runs, r)
			logf("%s", l.line(r))
		}
	}
	return runs, nil
}

// line describes one run with the lab's figures.
func (l *Lab) line(r Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s", r.Report.Name)
	for _, f := range l.Figures {
		fmt.Fprintf(&b, " | %s %.3g", f.Label, f.Of(r))
	}
	fmt.Fprintf(&b, " | generator errors %d, max lag %.2fs, panics %d", r.Report.GeneratorErrors, r.Report.MaxLagS, r.Panics)
	return b.String()
}

// Table renders the lab's figures by variant, medians [min–max] of the
// runs, then its checks with their verdicts.
func (l *Lab) Table(runs []Run) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%v per request; %s)\n\n| figure |", l.Name, l.Work, l.Setup)
	for _, v := range l.Variants {
		fmt.Fprintf(&b, " %s |", v.Name)
	}
	b.WriteString("\n|---|")
	for range l.Variants {
		b.WriteString("---:|")
	}
	b.WriteByte('\n')
	for _, f := range l.Figures {
		fmt.Fprintf(&b, "| %s |", f.Label)
		for _, v := range l.Variants {
			xs := values(runs, v.Name, f.Of)
			if len(xs) == 0 {
				b.WriteString(" – |")
				continue
			}
			med, lo, hi := report.Median(xs)
			fmt.Fprintf(&b, " %.3g [%.3g–%.3g] |", med, lo, hi)
		}
		b.WriteByte('\n')
	}
	if len(l.Checks) > 0 {
		b.WriteString("\n| criterion | median | want | verdict |\n|---|---:|---|---|\n")
		for _, c := range l.Checks {
			v := c.Value(runs)
			fmt.Fprintf(&b, "| %s | %.3g | %s | %s |\n", c.Label, v, c.want(), verdict(c.Pass(v)))
		}
	}
	return b.String()
}

// Pass says whether v meets the check (NaN, a figure no run has, never
// does).
func (c Check) Pass(v float64) bool { return v >= c.Min && v <= c.Max }

func (c Check) want() string {
	switch {
	case math.IsInf(c.Max, 1):
		return fmt.Sprintf("≥ %g", c.Min)
	case math.IsInf(c.Min, -1):
		return fmt.Sprintf("≤ %g", c.Max)
	}
	return fmt.Sprintf("%g … %g", c.Min, c.Max)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT MET"
}

// values returns f of every run of variant, leaving out NaN (a figure
// the run does not have).
func values(runs []Run, variant string, f func(Run) float64) []float64 {
	var xs []float64
	for _, r := range runs {
		if v := f(r); r.Variant == variant && !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	return xs
}

// MedianOf is the median of f over the runs of variant; NaN when no run
// has the figure.
func MedianOf(runs []Run, variant string, f func(Run) float64) float64 {
	xs := values(runs, variant, f)
	if len(xs) == 0 {
		return math.NaN()
	}
	m, _, _ := report.Median(xs)
	return m
}

// Paired returns, for each repetition that ran both variants, f of a's
// run ÷ f of b's: the two ran next to each other, so a neighbour's noise
// hits both.
func Paired(runs []Run, a, b string, f func(Run) float64) []float64 {
	byRep := map[int]map[string]float64{}
	for _, r := range runs {
		if byRep[r.Repetition] == nil {
			byRep[r.Repetition] = map[string]float64{}
		}
		byRep[r.Repetition][r.Variant] = f(r)
	}
	var out []float64
	for rep := 1; rep <= len(byRep); rep++ {
		x, okA := byRep[rep][a]
		y, okB := byRep[rep][b]
		if okA && okB && y > 0 && !math.IsNaN(x) {
			out = append(out, x/y)
		}
	}
	return out
}

// PairedMedian is the median of Paired; NaN without a pair.
func PairedMedian(runs []Run, a, b string, f func(Run) float64) float64 {
	xs := Paired(runs, a, b, f)
	if len(xs) == 0 {
		return math.NaN()
	}
	m, _, _ := report.Median(xs)
	return m
}

// Goodput returns the goodput of phase ÷ the run's capacity.
func Goodput(phase string) func(Run) float64 {
	return func(r Run) float64 {
		p, ok := r.Report.Phase(phase)
		if !ok || !(r.Capacity > 0) {
			return 0
		}
		return p.GoodputRPS / r.Capacity
	}
}

// Served returns the share of the requests offered in phase that
// succeeded.
func Served(phase string) func(Run) float64 {
	return func(r Run) float64 {
		p, ok := r.Report.Phase(phase)
		if !ok || !(p.OfferedRPS > 0) {
			return 0
		}
		return p.GoodputRPS / p.OfferedRPS
	}
}

// Never stands for a recovery that did not happen within the phase after
// the overload, in tables and medians.
const Never = 1e9

// Recovery returns the seconds from the end of phase until the server
// answers in time ≥ 95% of the next phase's offered load for 2 whole
// seconds in a row (report.Run.ServerRecoveryAfter), Never if it does not
// within that phase.
func Recovery(phase string) func(Run) float64 {
	return func(r Run) float64 {
		if s, ok := r.Report.ServerRecoveryAfter(phase, 2); ok {
			return s
		}
		return Never
	}
}

// ClassServed returns the share of the requests of the named classes
// (criticalities or tenants) offered in phase that succeeded; NaN when
// none of them was offered (a run without those classes).
func ClassServed(phase string, names ...string) func(Run) float64 {
	return func(r Run) float64 {
		p, ok := r.Report.Phase(phase)
		if !ok {
			return math.NaN()
		}
		var good, offered float64
		for _, cs := range [][]report.Class{p.ByCriticality, p.ByTenant} {
			for _, c := range cs {
				for _, n := range names {
					if c.Name == n {
						good += c.GoodputRPS
						offered += c.OfferedRPS
					}
				}
			}
		}
		if !(offered > 0) {
			return math.NaN()
		}
		return good / offered
	}
}

// median returns a Check's Value: the median of f over variant's runs.
func median(variant string, f func(Run) float64) func([]Run) float64 {
	return func(runs []Run) float64 { return MedianOf(runs, variant, f) }
}

// paired returns a Check's Value: the median ratio of a's f to b's.
func paired(a, b string, f func(Run) float64) func([]Run) float64 {
	return func(runs []Run) float64 { return PairedMedian(runs, a, b, f) }
}

// Clean reports what in the runs says the backend misbehaved: a handler
// panic, a panic or a data race in its stderr. "" when nothing did.
func Clean(runs []Run) string {
	var bad []string
	for _, r := range runs {
		switch {
		case r.Panics > 0:
			bad = append(bad, fmt.Sprintf("%s: %d handler panics", r.Report.Name, r.Panics))
		case strings.Contains(r.Stderr, "panic") || strings.Contains(r.Stderr, "DATA RACE"):
			bad = append(bad, fmt.Sprintf("%s: backend stderr: %.500s", r.Report.Name, r.Stderr))
		}
	}
	return strings.Join(bad, "\n")
}
