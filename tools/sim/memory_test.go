package sim

import (
	"testing"
)

// The avalanche's third run: each instance has memory for 160 requests in
// flight, fewer than levee's admission control alone lets in flight at
// the peak (checked at full size: the plain levee run's active instance
// exceeds it). Unprotected, such an instance dies (the crash rule);
// levee's overload manager reads the same figure and holds the requests
// in flight under it (its goal: 0.9 of the limit), refusing the rest as
// they arrive: no crash, goodput near capacity.
func TestAvalancheMemoryRule(t *testing.T) {
	s := scaled(load(t, "avalanche"), size(1, 0.3))
	var runs []RunSpec
	for _, r := range s.Runs {
		if r.Protection == "levee" {
			runs = append(runs, r)
		}
	}
	if len(runs) != 2 || runs[1].MemoryLimitScale >= 1 {
		t.Fatalf("avalanche runs %+v: want levee, then levee with a tight memory limit", s.Runs)
	}
	s.Runs = runs
	rep := Run(s, Options{Seed: 1, Parallel: 2})
	peak := func(r int) int {
		for _, in := range rep.Runs[r].Instances {
			if in.Name == "backend-0" {
				return in.PeakInflight
			}
		}
		t.Fatalf("%s: no backend-0", rep.Runs[r].Name)
		return 0
	}
	limit := float64(s.Tiers[1].MemoryLimit) * runs[1].MemoryLimitScale
	if !light() && float64(peak(0)) <= limit {
		t.Fatalf("levee alone: backend-0 peak in flight %d, not above %.0f: the tight run tests nothing", peak(0), limit)
	}
	lv := rep.Runs[1]
	if lv.Crashes != 0 {
		t.Fatalf("%s: %d crashes %+v, want 0", lv.Name, lv.Crashes, lv.CrashEvents)
	}
	if p := peak(1); float64(p) > limit {
		t.Errorf("%s: backend-0 peak in flight %d, want ≤ the memory limit %.0f", lv.Name, p, limit)
	}
	if p := phase(t, lv, "peak"); p.GoodputRPS < 0.8*lv.CapacityRPS {
		t.Errorf("%s: peak goodput %.0f/s, want ≥ 0.8 × capacity %.0f", lv.Name, p.GoodputRPS, lv.CapacityRPS)
	}
}
