//go:build realtime

// The soak of issue 14 on loopback: overload with naive retrying clients,
// rotating tenants and hostile input; the backend's RSS and goroutines
// must stay within ±10% (medians of 10 s windows against the median of
// everything after the warm-up), with no panic, no race report and no
// death. One minute (after a 3 s capacity measurement), as CI's real-time
// step runs it, judges panics, deaths and the answers to hostile input
// and shows the flatness figures (a run shorter than five minutes has no
// steady window to judge):
//
//	go test -tags realtime -run TestSoak -count=1 -v -timeout 10m ./tools/loopback/soak/
//
// The full soak, 10 minutes (warm-up 1 minute), in a quiet window:
//
//	SOAK_DURATION=10m go test -tags realtime -run TestSoak -count=1 -v -timeout 30m ./tools/loopback/soak/
//
// SOAK_LOAD (default 3) sets the overload in multiples of the capacity,
// SOAK_WORK (default 1ms) the CPU time of a request. At 1 ms the one-core
// generator is the bottleneck (measured 2026-12-02: 7,585 attempts/s at
// most, timers seconds late, a few dozen answers a second counted while
// the backend, polled directly, gave ~1,200); SOAK_WORK=5ms keeps it
// within its means (1,601 attempts/s, lag 0.07 s), so that what swings is
// the backend's.
package soak

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

// flatAfter is the shortest soak whose RSS and goroutines are judged for
// flatness: a minute of warm-up, then windows enough to compare.
const flatAfter = 5 * time.Minute

func TestSoak(t *testing.T) {
	cfg := Config{Duration: time.Minute, Load: 3}
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second {
			t.Fatalf("SOAK_DURATION=%q: want a duration of 10s or more", v)
		}
		cfg.Duration = d
	}
	if v, err := strconv.ParseFloat(os.Getenv("SOAK_LOAD"), 64); err == nil && v > 0 {
		cfg.Load = v
	}
	if v := os.Getenv("SOAK_WORK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("SOAK_WORK=%q: want a positive duration", v)
		}
		cfg.Work = d
	}
	last := time.Now()
	cfg.Progress = func(p load.Progress) {
		if time.Since(last) >= 10*time.Second {
			last = time.Now()
			t.Log(p.String())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+5*time.Minute)
	defer cancel()
	res, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Text())
	for _, p := range res.Problems() {
		t.Error(p)
	}
	if cfg.Duration < flatAfter {
		// Issue 14 asks for flat RSS and goroutines after the first
		// minute; a run this short has no such window (its generator is
		// still finding its pace, and the backend's connections with it),
		// so the figures are shown, and only panics, deaths, races and
		// the hostile-input problems above are judged.
		t.Logf("flatness not judged in a %v run (it is from %v on): RSS %.1f%% off, goroutines %.1f%% off",
			cfg.Duration, flatAfter, 100*res.RSS.Deviation, 100*res.Goroutines.Deviation)
		return
	}
	for _, f := range []Flatness{res.RSS, res.Goroutines} {
		if f.Samples < 10 || f.Windows < 3 {
			t.Errorf("%s: %d samples in %d windows after the warm-up, want ≥ 10 in ≥ 3", f.Name, f.Samples, f.Windows)
		}
		if f.Deviation > 0.10 {
			t.Errorf("%s: window medians %.0f … %.0f against a median of %.0f: %.1f%% off, want ≤ 10%%",
				f.Name, f.LowestW, f.HighestW, f.Median, 100*f.Deviation)
		}
	}
}
