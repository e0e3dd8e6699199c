//go:build realtime

// The slow-dependency lab over loopback, levee against the unprotected
// service, runs alternated. The full measurement (3 × 2 runs of 40 s,
// about 5 minutes, on a quiet 2-CPU machine):
//
//	go test -tags realtime -run TestSlowDependency -v -timeout 20m ./tools/loopback/slowdep/
//
// SLOWDEP_SCHEDULE ("fast,slow,after", default "10s,20s,10s") and
// SLOWDEP_REPEAT (default 3) shorten it; a smoke run:
//
//	SLOWDEP_SCHEDULE=3s,6s,4s SLOWDEP_REPEAT=1 go test -tags realtime -run TestSlowDependency -v ./tools/loopback/slowdep/
package slowdep

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

// schedule reads SLOWDEP_SCHEDULE.
func schedule(t *testing.T) Schedule {
	s := Schedule{Fast: 10 * time.Second, Slow: 20 * time.Second, After: 10 * time.Second}
	if v := os.Getenv("SLOWDEP_SCHEDULE"); v != "" {
		f := strings.Split(v, ",")
		var d [3]time.Duration
		for i := range d {
			var err error
			if len(f) != 3 {
				err = fmt.Errorf("want three durations")
			} else {
				d[i], err = time.ParseDuration(strings.TrimSpace(f[i]))
			}
			if err != nil || d[i] <= 0 {
				t.Fatalf("SLOWDEP_SCHEDULE=%q: %v", v, err)
			}
		}
		s = Schedule{Fast: d[0], Slow: d[1], After: d[2]}
	}
	return s
}

// TestSlowDependency checks issue 16's slow-dependency criteria on
// loopback: goodput ≥ 0.9 of the pool's capacity while the dependency is
// slow, ≤ 5% of handler runs after their client's deadline, ≥ 95% served
// within 2 s of the recovery, nothing shed before; the unprotected
// service is run beside it for the comparison.
func TestSlowDependency(t *testing.T) {
	s := schedule(t)
	repeat := 3
	if v, err := strconv.Atoi(os.Getenv("SLOWDEP_REPEAT")); err == nil && v > 0 {
		repeat = v
	}
	ctx := context.Background()
	var lines []Line
	for i := range repeat {
		order := []string{None, Levee}
		if i%2 == 1 {
			order = []string{Levee, None}
		}
		for _, prot := range order {
			l, err := Run(ctx, prot, s, fmt.Sprintf("%s-%d", prot, i+1), nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%-12s before %.2f | slow %.2f of the pool, %.1f%% late, p99 %v | recovery %.1fs, after %.2f",
				l.Run.Name, l.FastGoodput, l.SlowGoodput, 100*l.SlowLate, l.SlowP99.Round(time.Millisecond), l.Recovery, l.AfterGoodput)
			lines = append(lines, l)
		}
	}
	t.Logf("schedule %v fast, %v slow, %v after; %d alternated runs each\n%s", s.Fast, s.Slow, s.After, repeat, Table(lines, []string{None, Levee}))
	med := func(f func(Line) float64) float64 {
		var xs []float64
		for _, l := range lines {
			if l.Protection == Levee {
				xs = append(xs, f(l))
			}
		}
		m, _, _ := report.Median(xs)
		return m
	}
	if g := med(func(l Line) float64 { return l.FastGoodput }); g < 0.98 {
		t.Errorf("levee served %.2f of the offered load before the slowdown; want ≥ 0.98", g)
	}
	if g := med(func(l Line) float64 { return l.SlowGoodput }); g < 0.9 {
		t.Errorf("levee goodput while the dependency is slow = %.2f of the pool's capacity; want ≥ 0.9", g)
	}
	if late := med(func(l Line) float64 { return l.SlowLate }); late > 0.05 {
		t.Errorf("levee handler runs after their client's deadline = %.1f%% in the slow phase; want ≤ 5%%", 100*late)
	}
	if r := med(func(l Line) float64 {
		if l.Recovery < 0 {
			return 1e9
		}
		return l.Recovery
	}); r > 2 {
		t.Errorf("levee served ≥ 95%% again %.1fs after the dependency recovered; want ≤ 2s", r)
	}
}
