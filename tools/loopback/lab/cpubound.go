package lab

import (
	"math"
	"time"

	"github.com/levee-dev/levee/tools/backend"
)

// CPUBound is issue 16's loopback check of a CPU-bound service, work of
// CPU per request (1 ms and 20 ms in the issue), levee beside the
// unprotected service, naive clients, every request CRITICAL from one
// tenant (the clients' /24). The schedule: 0.2× (the unloaded latency),
// 0.9×, 1.5×, 2× and 5× of the capacity, each overload followed by 0.5×.
//
// The criteria, for levee: at 1 ms, ≥ 99% served at 0.9×, goodput
// ≥ 0.9 of the capacity at 1.5× and 2× and ≥ 0.75 at 5×; at 20 ms,
// goodput ≥ 0.95 at 2× and 5× and p50 at 2× ≤ 3× the p50 at 0.2×; at
// both, ≥ 95% of the load after each overload served within 2 s.
func CPUBound(work time.Duration) *Lab {
	l := &Lab{
		Name:  "cpu-bound " + work.String(),
		Setup: "untrusted callers, one tenant (the clients' /24), every request CRITICAL",
		Work:  work,
		Steps: []Step{
			{"0.2x", 0.2, 4 * time.Second},
			{"0.9x", 0.9, 6 * time.Second},
			{"1.5x", 1.5, 6 * time.Second},
			{"0.5x-a", 0.5, 4 * time.Second},
			{"2x", 2, 6 * time.Second},
			{"0.5x-b", 0.5, 4 * time.Second},
			{"5x", 5, 6 * time.Second},
			{"0.5x-c", 0.5, 5 * time.Second},
		},
		Overload: "2x",
		Variants: []Variant{{Name: backend.None, Protection: backend.None}, {Name: backend.Levee, Protection: backend.Levee}},
		Figures: []Figure{
			{"served at 0.9x", Served("0.9x")},
			{"goodput 1.5x ÷ capacity", Goodput("1.5x")},
			{"goodput 2x ÷ capacity", Goodput("2x")},
			{"goodput 5x ÷ capacity", Goodput("5x")},
			{"p50 at 0.2x (s)", P50("0.2x")},
			{"p50 2x ÷ p50 0.2x", P50Ratio("2x", "0.2x")},
			{"recovery after 1.5x (s)", Recovery("1.5x")},
			{"recovery after 2x (s)", Recovery("2x")},
			{"recovery after 5x (s)", Recovery("5x")},
			{"handler runs after their deadline", Wasted},
			{"attempts ÷ offered at 5x", attempts("5x")},
		},
	}
	lv := backend.Levee
	recovery := []Check{
		{"recovery after 1.5x (s)", median(lv, Recovery("1.5x")), 0, 2},
		{"recovery after 2x (s)", median(lv, Recovery("2x")), 0, 2},
		{"recovery after 5x (s)", median(lv, Recovery("5x")), 0, 2},
	}
	if work < 10*time.Millisecond {
		l.Checks = []Check{
			{"served at 0.9x", median(lv, Served("0.9x")), 0.99, inf},
			{"goodput 1.5x ÷ capacity", median(lv, Goodput("1.5x")), 0.9, inf},
			{"goodput 2x ÷ capacity", median(lv, Goodput("2x")), 0.9, inf},
			{"goodput 5x ÷ capacity", median(lv, Goodput("5x")), 0.75, inf},
		}
	} else {
		l.Checks = []Check{
			{"goodput 2x ÷ capacity", median(lv, Goodput("2x")), 0.95, inf},
			{"goodput 5x ÷ capacity", median(lv, Goodput("5x")), 0.95, inf},
			{"p50 2x ÷ p50 0.2x", median(lv, P50Ratio("2x", "0.2x")), 0, 3},
		}
	}
	l.Checks = append(l.Checks, recovery...)
	return l
}

// P50 returns the median latency of the successes of phase, seconds
// (NaN when nothing succeeded).
func P50(phase string) func(Run) float64 {
	return func(r Run) float64 {
		p, ok := r.Report.Phase(phase)
		if !ok || !(p.Latency.P50 > 0) {
			return math.NaN()
		}
		return p.Latency.P50
	}
}

// P50Ratio returns the p50 of phase ÷ the p50 of base (NaN when either
// phase has no success).
func P50Ratio(phase, base string) func(Run) float64 {
	return func(r Run) float64 { return P50(phase)(r) / P50(base)(r) }
}

// Wasted is the share of the backend's handler runs that finished after
// their client's deadline, over the whole run.
func Wasted(r Run) float64 { return r.Report.WastedWorkShare }
