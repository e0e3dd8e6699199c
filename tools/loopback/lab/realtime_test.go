//go:build realtime

// The loopback labs' acceptance criteria (issues 14 and 16): separate
// pinned processes, three alternated runs of each variant, medians with
// their spread. On a quiet 2-CPU machine:
//
//	go test -tags realtime -run TestCPUBound -count=1 -v -timeout 30m ./tools/loopback/lab/      # ~10 min
//	go test -tags realtime -run TestRejectionCost -count=1 -v ./tools/loopback/lab/              # ~30 s
//	go test -tags realtime -run 'TestTenants|TestLadder|TestNeighbour' -count=1 -v -timeout 30m ./tools/loopback/lab/   # ~6 min
//
// LAB_REPEAT (default 3) sets the repetitions, LAB_SCALE (default 1)
// multiplies the phases' lengths, LAB_WORK (default "1ms,20ms") the CPU
// costs of TestCPUBound; a harness check of everything in a few minutes:
//
//	LAB_REPEAT=1 LAB_SCALE=0.3 LAB_WORK=1ms go test -tags realtime -count=1 -v -timeout 30m ./tools/loopback/lab/
package lab

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loopback"
)

func options(t *testing.T) Options {
	o := Options{Repeat: 3, Scale: 1, Logf: t.Logf}
	if v, err := strconv.Atoi(os.Getenv("LAB_REPEAT")); err == nil && v > 0 {
		o.Repeat = v
	}
	if v, err := strconv.ParseFloat(os.Getenv("LAB_SCALE"), 64); err == nil && v > 0 {
		o.Scale = v
	}
	return o
}

// check runs lab and asserts its criteria and a clean backend.
func check(t *testing.T, lab *Lab) {
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	runs, err := lab.Execute(ctx, options(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + lab.Table(runs))
	if bad := Clean(runs); bad != "" {
		t.Errorf("the backend misbehaved:\n%s", bad)
	}
	for _, c := range lab.Checks {
		if v := c.Value(runs); !c.Pass(v) {
			t.Errorf("%s = %.3g, want %s", c.Label, v, c.want())
		}
	}
}

// TestCPUBound: 1 ms and 20 ms CPU-bound (issue 16): at 1 ms ≥ 99% served
// at 0.9×, goodput ≥ 0.9 at 1.5× and 2×, ≥ 0.75 at 5×; at 20 ms ≥ 0.95 at
// 2× and 5×, p50 at 2× ≤ 3× unloaded; recovery ≤ 2 s after each overload.
func TestCPUBound(t *testing.T) {
	works := []time.Duration{time.Millisecond, 20 * time.Millisecond}
	if v := os.Getenv("LAB_WORK"); v != "" {
		works = nil
		for _, s := range strings.Split(v, ",") {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				t.Fatalf("LAB_WORK: %v", err)
			}
			works = append(works, d)
		}
	}
	for _, w := range works {
		t.Run(w.String(), func(t *testing.T) { check(t, CPUBound(w)) })
	}
}

// TestRejectionCost states the server CPU one rejection costs (issue 16:
// goal ≤ 12 µs), beside the CPU of a served request that does 1 µs of
// work on the unprotected server, in the same run.
func TestRejectionCost(t *testing.T) {
	ctx := context.Background()
	const rate, rounds = 1500, 3
	// Alternated, so that a neighbour's noise hits both; the lowest of each.
	costs, err := loopback.Cheapest(rounds,
		func() (loopback.Cost, error) {
			return AnswerCost(ctx, backend.Levee, backend.LeveeOptions{ForceOverload: true}, rate, 1)
		},
		func() (loopback.Cost, error) { return AnswerCost(ctx, backend.None, backend.LeveeOptions{}, rate, 1) })
	if err != nil {
		t.Fatalf("no usable measurement: %v", err)
	}
	rej, served := costs[0], costs[1]
	t.Logf("levee, forced to refuse everything: %.1f µs of server CPU per answer (%.0f answered in %v, %.0f rejected; idle CPU %.1f%%)",
		rej.Micros, rej.Answered, loopback.CostPhase, rej.Rejected, 100*rej.IdleShare)
	t.Logf("unprotected, 1 µs of work: %.1f µs per answer (%.0f answered); a rejection costs %.2f× a bare answer",
		served.Micros, served.Answered, rej.Micros/served.Micros)
	if rej.Rejected < 0.9*rej.Answered {
		t.Errorf("only %.0f of %.0f answers were rejections: the figure is not a rejection's", rej.Rejected, rej.Answered)
	}
	verdict := "met"
	if rej.Micros > 12 {
		verdict = "not met"
	}
	t.Logf("issue 16's goal, ≤ 12 µs per rejection: %s (stated, not asserted: an absolute figure of this machine)", verdict)
}

// TestTenants: 2,000 trusted tenant ids at 3× keep ≥ 0.95 of one tenant's
// goodput in the same run; ≥ 95% served within 2 s after (issue 14).
func TestTenants(t *testing.T) { check(t, Tenants()) }

// TestLadder: 2× over four criticalities: CRITICAL_PLUS ≥ 99%, CRITICAL
// ≥ 75%, each SHEDDABLE level ≤ 10%, total within 5% of the same load
// without levels (issue 16).
func TestLadder(t *testing.T) { check(t, Ladder()) }

// TestNeighbour: a tenant at 5× beside nine at 0.3× in all: the nine
// served ≥ 99% (issue 16).
func TestNeighbour(t *testing.T) { check(t, Neighbour()) }
