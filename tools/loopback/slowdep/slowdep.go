// Package slowdep is the loopback lab of a service whose dependency slows
// down: each request burns 200 µs of CPU and holds one of 8 connections to
// a dependency that answers in 5 ms, then 50 ms, then 5 ms again
// (backend.SlowDependency), offered a constant 0.7 of what the pool
// serves at 5 ms (1120 requests a second) by naive clients that retry
// twice at once with a 1 s deadline per attempt. The CPU stays low
// throughout: only a signal that sees requests waiting inside the handler
// (pressure.Concurrency) can tell that the 50 ms phase is overloaded (the
// pool serves 160 a second).
//
// The protections are backend Wraps registered with loopback.HijackWith:
// Wraps returns the unprotected service and levee with pressure.Default's
// signals (backend.LeveeWithConcurrency); levee's bench module adds
// failsafe-go's adaptive limiter. Run runs one protection; the figures of
// a Line are those issue 16 asks for. The realtime test of this package
// compares levee with the unprotected service; see its documentation for
// the commands.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), slowdep is a tool in the tools module
// (github.com/levee-dev/levee/tools): it imports the loopback harness and its
// parts (tools/loopback, tools/backend, tools/load, tools/report), and only
// the bench/ module imports it, to add its peers' protections.
package slowdep

import (
	"context"
	"os"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
	"github.com/levee-dev/levee/tools/report"
)

// The protections of Wraps.
const (
	None  = "dep-none"
	Levee = "dep-levee"
)

// Wraps returns the unprotected slow-dependency service and levee in front
// of it, for loopback.HijackWith.
func Wraps() map[string]backend.Wrap {
	return map[string]backend.Wrap{
		None:  backend.SlowDependencyWrap(nil),
		Levee: backend.SlowDependencyWrap(backend.LeveeWithConcurrency),
	}
}

// Offered is the offered load, requests per second: 0.7 of the pool's 8
// connections ÷ 5 ms. Capacity is what the pool serves at 50 ms.
const (
	Offered  = 0.7 * 1600
	Capacity = 8 / 0.050
)

// Schedule is the length of each phase: the dependency fast, slow, fast
// again.
type Schedule struct{ Fast, Slow, After time.Duration }

// Phase names.
const (
	PhaseFast      = "fast"
	PhaseSlow      = "slow"
	PhaseRecovered = "recovered"
)

// Line is one run's figures.
type Line struct {
	Protection string
	// FastGoodput is the goodput before the slowdown ÷ Offered.
	FastGoodput float64
	// SlowGoodput is the goodput while the dependency is slow ÷ Capacity.
	SlowGoodput float64
	// SlowLate is the share of the handler runs that ended in the slow
	// phase after their client's deadline.
	SlowLate float64
	// SlowP99 is the p99 latency of the successes of the slow phase, from
	// their scheduled send.
	SlowP99 time.Duration
	// Recovery is the seconds from the dependency's recovery until the
	// server answers ≥ 95% of the offered load in time for a whole second
	// (-1: not within the phase).
	Recovery float64
	// AfterGoodput is the goodput of the recovered phase from its third
	// second on ÷ Offered.
	AfterGoodput float64
	Run          report.Run
}

// Run runs prot (a name registered with loopback.HijackWith) through s
// with fresh processes. It sets backend.EnvSlowDependency in this process,
// whose environment the backend inherits.
func Run(ctx context.Context, prot string, s Schedule, name string, progress func(load.Progress)) (Line, error) {
	if err := os.Setenv(backend.EnvSlowDependency, s.Fast.String()+","+s.Slow.String()); err != nil {
		return Line{}, err
	}
	res, err := loopback.Run(ctx, loopback.Config{
		Name: name, Protection: prot, Client: loopback.Naive,
		Work: 200 * time.Microsecond, Timeout: time.Second, Retries: 2,
		Phases: []load.Phase{
			{Name: PhaseFast, Rate: Offered, Duration: s.Fast},
			{Name: PhaseSlow, Rate: Offered, Duration: s.Slow},
			{Name: PhaseRecovered, Rate: Offered, Duration: s.After},
		},
		Drain:    2 * time.Second,
		Progress: progress,
	})
	if err != nil {
		return Line{}, err
	}
	run := res.Run("")
	l := Line{Protection: prot, Run: run, Recovery: -1}
	fast, _ := run.Phase(PhaseFast)
	slow, _ := run.Phase(PhaseSlow)
	l.FastGoodput = fast.GoodputRPS / Offered
	l.SlowGoodput = slow.GoodputRPS / Capacity
	l.SlowP99 = time.Duration(slow.Latency.P99 * 1e9)
	l.SlowLate = lateShare(run, slow)
	if r, ok := run.ServerRecoveryAfter(PhaseSlow, 1); ok {
		l.Recovery = r
	}
	if after, ok := run.Phase(PhaseRecovered); ok {
		l.AfterGoodput = windowRate(run.Series.GoodputRPS, run.Series.BucketS, after.StartS+2, after.EndS) / Offered
	}
	return l, nil
}

// lateShare returns the handler runs after their client's deadline ÷ all
// handler runs (in time or late) of phase p, from the server's series.
func lateShare(run report.Run, p report.Phase) float64 {
	if len(run.Series.Instances) == 0 {
		return 0
	}
	in := run.Series.Instances[0]
	late := windowRate(in.WastedRPS, run.Series.BucketS, p.StartS, p.EndS)
	ok := windowRate(in.ServedRPS, run.Series.BucketS, p.StartS, p.EndS)
	if late+ok == 0 {
		return 0
	}
	return late / (late + ok)
}

// windowRate returns the mean of a per-bucket rate over [from, to)
// seconds.
func windowRate(xs []float64, bucketS, from, to float64) float64 {
	if !(bucketS > 0) || to <= from {
		return 0
	}
	var sum float64
	n := 0
	for i := int(from / bucketS); float64(i)*bucketS < to && i < len(xs); i++ {
		if i >= 0 {
			sum += xs[i]
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

// Table renders the medians [min–max] of lines by protection, in the
// order given.
func Table(lines []Line, order []string) string {
	rows := []report.Figure[Line]{
		{Label: "goodput before ÷ offered", Of: func(l Line) float64 { return l.FastGoodput }},
		{Label: "goodput slow ÷ pool capacity", Of: func(l Line) float64 { return l.SlowGoodput }},
		{Label: "late handler runs (slow)", Of: func(l Line) float64 { return l.SlowLate }},
		{Label: "p99 slow (s)", Of: func(l Line) float64 { return l.SlowP99.Seconds() }},
		{Label: "recovery after (s, 1e9 never)", Of: func(l Line) float64 {
			if l.Recovery < 0 {
				return 1e9
			}
			return l.Recovery
		}},
		{Label: "goodput from 2 s after ÷ offered", Of: func(l Line) float64 { return l.AfterGoodput }},
	}
	return report.MedianTable("slow dependency (medians [min–max])", order, lines, func(l Line) string { return l.Protection }, rows)
}
