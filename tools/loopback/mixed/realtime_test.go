//go:build realtime

// The loopback checks of issue 14 (2,000 tenants) and issue 16 (the
// criticality ladder, a noisy neighbour): separate pinned processes, three
// alternated runs of each variant, medians with their spread. About 7
// minutes on a quiet 2-CPU machine:
//
//	go test -tags realtime -run 'TestTenants|TestLadder|TestNeighbour' -count=1 -v -timeout 30m ./tools/loopback/mixed/
//
// MIXED_REPEAT (default 3) sets the repetitions, MIXED_SCALE (default 1)
// multiplies the phases' lengths; a harness check of about a minute:
//
//	MIXED_REPEAT=1 MIXED_SCALE=0.3 go test -tags realtime -count=1 -v ./tools/loopback/mixed/
package mixed

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

func options(t *testing.T) Options {
	o := Options{Repeat: 3, Scale: 1, Logf: t.Logf}
	if v, err := strconv.Atoi(os.Getenv("MIXED_REPEAT")); err == nil && v > 0 {
		o.Repeat = v
	}
	if v, err := strconv.ParseFloat(os.Getenv("MIXED_SCALE"), 64); err == nil && v > 0 {
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
