package goodput

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/loopback/slowdep"
)

// TestSlowDependency runs the slow-dependency lab (package slowdep: 200 µs
// of CPU, a pool of 8 connections to a dependency that goes 5 → 50 → 5 ms,
// 0.7 of the pool's capacity offered by naive clients retrying twice with
// a 1 s deadline) with levee, failsafe-go's adaptive limiter and nothing,
// alternated, and writes slowdep.md. About 6 minutes:
//
//	cd bench && LEVEE_BENCH_SLOWDEP=1 GOWORK=off go test -run TestSlowDependency -v -timeout 20m ./goodput
//
// LEVEE_BENCH_SLOWDEP_SHORT=1 runs one round of 3 s / 6 s / 4 s phases, to
// check the harness.
func TestSlowDependency(t *testing.T) {
	if os.Getenv("LEVEE_BENCH_SLOWDEP") != "1" {
		t.Skip("loopback slow-dependency comparison: set LEVEE_BENCH_SLOWDEP=1 (about 6 minutes, 2 CPUs)")
	}
	s, repeat := slowdep.Schedule{Fast: 10 * time.Second, Slow: 20 * time.Second, After: 10 * time.Second}, 3
	if os.Getenv("LEVEE_BENCH_SLOWDEP_SHORT") == "1" {
		s, repeat = slowdep.Schedule{Fast: 3 * time.Second, Slow: 6 * time.Second, After: 4 * time.Second}, 1
	}
	order := []string{slowdep.None, slowdep.Levee, FailsafeDep}
	var lines []slowdep.Line
	for i := range repeat {
		o := order
		if i%2 == 1 {
			o = []string{FailsafeDep, slowdep.Levee, slowdep.None}
		}
		for _, prot := range o {
			l, err := slowdep.Run(context.Background(), prot, s, fmt.Sprintf("%s-%d", prot, i+1), progress(t, prot))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%-16s before %.2f | slow %.2f of the pool, %.1f%% late, p99 %v | recovery %.1fs, after %.2f",
				l.Run.Name, l.FastGoodput, l.SlowGoodput, 100*l.SlowLate, l.SlowP99.Round(time.Millisecond), l.Recovery, l.AfterGoodput)
			lines = append(lines, l)
		}
	}
	table := fmt.Sprintf("Phases %v / %v / %v, %d alternated runs each.\n\n%s", s.Fast, s.Slow, s.After, repeat, slowdep.Table(lines, order))
	if err := os.WriteFile("slowdep.md", []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + table)
}
