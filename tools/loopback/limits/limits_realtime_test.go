//go:build realtime

// The goroutine-ceiling and descriptor-limit labs over loopback (issue
// 22): a server at its goroutine ceiling (1000) or its RLIMIT_NOFILE
// (256, set in the server process), attacked by connections held open and
// more requests, levee against the unprotected server. The full
// measurement (3 × 2 runs of 20 s each, about 5 minutes for both):
//
//	go test -tags realtime -run 'TestGoroutineCeiling|TestFileLimit' -v -timeout 20m ./tools/loopback/limits/
//
// LIMITLAB_SCHEDULE ("before,attack,after", default "4s,10s,6s"),
// LIMITLAB_REPEAT (default 3) and LIMITLAB_PROTECTIONS (default
// "none,levee") change it; LIMITLAB_LOG=1 prints each server's log and
// trace. A smoke run:
//
//	LIMITLAB_SCHEDULE=2s,5s,4s LIMITLAB_REPEAT=1 go test -tags realtime -run 'TestGoroutineCeiling|TestFileLimit' -v ./tools/loopback/limits/
package limits

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func runLimits(t *testing.T, kind string) []LimitLine {
	sched := durations(t, "LIMITLAB_SCHEDULE", [3]time.Duration{4 * time.Second, 10 * time.Second, 6 * time.Second})
	prots := strings.Split(os.Getenv("LIMITLAB_PROTECTIONS"), ",")
	if prots[0] == "" {
		prots = []string{None, Levee}
	}
	var lines []LimitLine
	for i := range repeat("LIMITLAB_REPEAT", 3) {
		for _, p := range prots {
			l, err := RunLimit(context.Background(), LimitConfig{Protection: p, Kind: kind, Schedule: sched})
			if err != nil {
				t.Fatalf("%s #%d: %v", p, i+1, err)
			}
			t.Logf("%s #%d: level %s (%d steps critical), goroutines %d, probes %d/%d, served %.2f during, %.2f after, %d connections closed, died %v, panicked %v",
				p, i+1, l.MaxLevel, l.CriticalSteps, l.PeakGoroutines, l.ProbesOK, l.Probes, l.AttackServed, l.AfterServed, l.Closed, l.Died, l.Panicked)
			if os.Getenv("LIMITLAB_LOG") != "" {
				t.Logf("%s #%d server log:\n%s", p, i+1, l.Log)
				for _, st := range l.Trace {
					t.Log(TraceLine(st))
				}
			}
			lines = append(lines, l)
		}
	}
	t.Log("\n" + LimitTable(lines, prots))
	return lines
}

// checkLimit checks levee's runs: the last level reached and held, the
// server alive and without a panic, every run recovering by itself and
// the median run serving ≥ 95% of its requests every second from 3 s
// after the attack, and (probes > 0) at least that share of the health
// probes answered during the attack. The recovery is judged on the
// median, as every loopback figure is: one run of three at 4.2 s (and
// another sitting's at 4.5 s) beside medians of 2.5 s failed CI with the
// code before and after the same change alike.
func checkLimit(t *testing.T, lines []LimitLine, probes float64) {
	var recovery []float64
	for _, l := range lines {
		if l.Protection != Levee {
			continue
		}
		if l.MaxLevel != "critical" || l.CriticalSteps == 0 {
			t.Errorf("levee: highest level %q (%d steps critical), want critical", l.MaxLevel, l.CriticalSteps)
		}
		if l.Died || l.Panicked {
			t.Errorf("levee: the server died (%v) or panicked (%v)", l.Died, l.Panicked)
		}
		if probes > 0 && (l.Probes == 0 || float64(l.ProbesOK) < probes*float64(l.Probes)) {
			t.Errorf("levee: %d of %d health probes answered during the attack, want ≥ %.0f%%", l.ProbesOK, l.Probes, 100*probes)
		}
		if l.Recovery < 0 {
			t.Errorf("levee: no recovery after the attack, want one within 3 s")
		}
		recovery = append(recovery, l.Recovery)
	}
	if m := median(recovery); len(recovery) > 0 && m > 3 {
		t.Errorf("levee: median recovery %.1fs after the attack (runs %v), want within 3 s", m, recovery)
	}
}

// TestGoroutineCeiling: the goroutine lab. The goroutines are held by
// connections and requests; the health probes are answered throughout.
func TestGoroutineCeiling(t *testing.T) { checkLimit(t, runLimits(t, Goroutines), 0.99) }

// TestFileLimit: the descriptor lab. The attack floods the accept queue
// with connections that hold a descriptor for nothing: a health probe's
// connection waits its turn among them whatever the server does (it
// cannot tell them apart before it accepts), so the share of probes
// answered is reported beside the unprotected server's, not required.
func TestFileLimit(t *testing.T) { checkLimit(t, runLimits(t, Files), 0) }
