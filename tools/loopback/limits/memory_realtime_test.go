//go:build realtime

// The memory lab over loopback (issue 22's acceptance): a server with
// GOMEMLIMIT=256MiB whose requests each hold a pointer-free 1 MiB slice
// for 500 ms, offered half of what fits, then 3× what fits, then half
// again; the unprotected server, the overload manager alone and levee
// (admission control and the overload manager), runs alternated. The full
// measurement (3 × 3 runs of 36 s, about 6 minutes, on a quiet 2-CPU
// machine):
//
//	go test -tags realtime -run TestMemory -v -timeout 20m ./tools/loopback/limits/
//
// MEMLAB_SCHEDULE ("before,surge,after", default "5s,20s,10s"),
// MEMLAB_REPEAT (default 3) and MEMLAB_PROTECTIONS (default
// "none,overload,levee"; "admit" is admission control alone, with every
// signal) change it; MEMLAB_LOG=1 prints each server's log and a trace of
// its state every 250 ms. A smoke run:
//
//	MEMLAB_SCHEDULE=2s,5s,4s MEMLAB_REPEAT=1 go test -tags realtime -run TestMemory -v ./tools/loopback/limits/
package limits

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func durations(t *testing.T, env string, def [3]time.Duration) [3]time.Duration {
	v := os.Getenv(env)
	if v == "" {
		return def
	}
	f := strings.Split(v, ",")
	var d [3]time.Duration
	for i := range d {
		var err error
		if len(f) == 3 {
			d[i], err = time.ParseDuration(strings.TrimSpace(f[i]))
		}
		if len(f) != 3 || err != nil || d[i] <= 0 {
			t.Fatalf("%s=%q: want three durations", env, v)
		}
	}
	return d
}

func repeat(env string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(env)); err == nil && n > 0 {
		return n
	}
	return def
}

// TestMemory checks: unprotected, the RSS grows past 2× GOMEMLIMIT; with
// the overload manager (alone, and in levee) it stays within 1.25×, the
// surge's goodput is ≥ 0.8 of what fits, every health probe is answered,
// and every second from 2 s after the surge serves ≥ 95% of its
// requests. Medians over the runs.
func TestMemory(t *testing.T) {
	sched := durations(t, "MEMLAB_SCHEDULE", [3]time.Duration{5 * time.Second, 20 * time.Second, 10 * time.Second})
	prots := strings.Split(os.Getenv("MEMLAB_PROTECTIONS"), ",")
	if prots[0] == "" {
		prots = []string{None, Manager, Levee}
	}
	var lines []MemoryLine
	for i := range repeat("MEMLAB_REPEAT", 3) {
		for _, p := range prots {
			l, err := RunMemory(context.Background(), MemoryConfig{Protection: p, Schedule: sched})
			if err != nil {
				t.Fatalf("%s #%d: %v", p, i+1, err)
			}
			t.Logf("%s #%d: RSS %.2f (surge %.2f) × limit, GC %.2f, goodput %.2f of what fits, before %.2f served, recovery %.1fs, probes %d/%d, level %s, died %v",
				p, i+1, l.PeakRSS, l.SurgeRSS, l.GCShare, l.Goodput, l.NormalServed, l.Recovery, l.ProbesOK, l.Probes, l.MaxLevel, l.Died)
			if os.Getenv("MEMLAB_LOG") != "" {
				t.Logf("%s #%d server log:\n%s", p, i+1, l.Log)
				for _, st := range l.Trace {
					t.Log(TraceLine(st))
				}
			}
			lines = append(lines, l)
		}
	}
	t.Log("\n" + MemoryTable(lines, prots))
	med := func(p string, f func(MemoryLine) float64) float64 {
		var xs []float64
		for _, l := range lines {
			if l.Protection == p {
				xs = append(xs, f(l))
			}
		}
		return median(xs)
	}
	for _, p := range prots {
		switch p {
		case None:
			if got := med(p, func(l MemoryLine) float64 { return l.PeakRSS }); got <= 2 {
				t.Errorf("unprotected: peak RSS %.2f × the limit, want > 2 (the lab does not overload)", got)
			}
		case Levee, Manager:
			if got := med(p, func(l MemoryLine) float64 { return l.PeakRSS }); got > 1.25 {
				t.Errorf("%s: peak RSS %.2f × the limit, want ≤ 1.25", p, got)
			}
			if got := med(p, func(l MemoryLine) float64 { return l.Goodput }); got < 0.8 {
				t.Errorf("%s: surge goodput %.2f of what fits, want ≥ 0.8", p, got)
			}
			if got := med(p, func(l MemoryLine) float64 { return float64(l.Probes - l.ProbesOK) }); got > 0 {
				t.Errorf("%s: %.0f health probes failed, want 0", p, got)
			}
			if got := med(p, func(l MemoryLine) float64 { return l.Recovery }); got < 0 || got > 2 {
				t.Errorf("%s: recovery %.1fs after the surge, want within 2 s", p, got)
			}
			for _, l := range lines {
				if l.Protection == p && (l.Died || l.Panicked) {
					t.Errorf("%s: the server died (%v) or panicked (%v)", p, l.Died, l.Panicked)
				}
			}
		}
	}
}
