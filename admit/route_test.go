package admit

import (
	"testing"
	"time"
)

func TestRouteTable(t *testing.T) {
	const ms = int64(time.Millisecond)
	sec := int64(time.Second)
	type sample struct {
		d  int64 // ns
		at int64 // ns
	}
	// n samples of d, one every 10 ms from `from`.
	series := func(n int, d, from int64) []sample {
		out := make([]sample, n)
		for i := range out {
			out[i] = sample{d, from + int64(i)*10*ms}
		}
		return out
	}
	tests := []struct {
		name     string
		samples  []sample
		now      int64
		left     int64
		wantEst  [2]int64 // range
		wantTrue bool     // cannotMeet(left, now)
	}{
		{"too little evidence refuses nothing", series(minEvidence-1, 200*ms, 0), sec, 100 * ms, [2]int64{200 * ms, 200 * ms}, false},
		{"enough evidence refuses", series(minEvidence+1, 200*ms, 0), sec, 100 * ms, [2]int64{200 * ms, 200 * ms}, true},
		{"time left above the estimate", series(100, 200*ms, 0), 2 * sec, 300 * ms, [2]int64{200 * ms, 200 * ms}, false},
		{"stale evidence refuses nothing", series(100, 200*ms, 0), 10 * sec, 100 * ms, [2]int64{200 * ms, 200 * ms}, false},
		{"one hour-long sample barely moves it", append(series(100, ms, 0), sample{int64(time.Hour) - 1, sec + 10*ms}), 2 * sec, 0, [2]int64{ms, ms * 103 / 100}, false},
		{"a route that got faster is followed", append(series(100, 3*sec, 0), series(50, ms, sec+ms)...), 2 * sec, 0, [2]int64{ms, 2 * ms}, false},
		{"the 10th percentile, not the mean", func() []sample {
			var out []sample
			for i := range 2000 {
				d := 100 * ms // 90% slow
				if i%10 == 0 {
					d = 10 * ms
				}
				out = append(out, sample{d, int64(i) * ms})
			}
			return out
		}(), 2 * sec, 0, [2]int64{10 * ms, 100 * ms}, false},
		{"samples beyond 10 min are not service times", []sample{{int64(time.Hour), 0}}, sec, 0, [2]int64{0, 0}, false},
	}
	for _, tt := range tests {
		var rt routeTable
		for _, s := range tt.samples {
			rt.observe(42, s.d, s.at)
		}
		est, _ := rt.serviceTime(42, tt.now)
		if est < tt.wantEst[0] || est > tt.wantEst[1] {
			t.Errorf("%s: estimate %v, want in [%v, %v]", tt.name, time.Duration(est), time.Duration(tt.wantEst[0]), time.Duration(tt.wantEst[1]))
		}
		if tt.left == 0 {
			continue
		}
		if got := rt.cannotMeet(42, tt.left, tt.now); got != tt.wantTrue {
			t.Errorf("%s: cannotMeet(%v left) = %v, want %v", tt.name, time.Duration(tt.left), got, tt.wantTrue)
		}
	}
}

// TestRouteTableBounded: at most routeSlots routes are learned; a route
// silent for routeEvict gives its slot to a new one.
func TestRouteTableBounded(t *testing.T) {
	var rt routeTable
	hash := func(i int) uint64 { return uint64(i+1) * 0x9E3779B97F4A7C15 }
	for i := range 10 * routeSlots {
		rt.observe(hash(i), int64(time.Millisecond), 0)
	}
	if n := rt.routes(); n > routeSlots {
		t.Fatalf("%d routes learned, want ≤ %d", n, routeSlots)
	}
	fresh := 0
	later := int64(routeEvict) + 1
	for i := 10 * routeSlots; i < 20*routeSlots; i++ {
		rt.observe(hash(i), int64(time.Millisecond), later)
		if s := rt.find(hash(i)); s != nil {
			fresh++
		}
	}
	if fresh < routeSlots/2 {
		t.Errorf("%d new routes took the slots of routes silent for %v, want most of %d", fresh, routeEvict, routeSlots)
	}
}
