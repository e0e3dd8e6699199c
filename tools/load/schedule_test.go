package load

import (
	"math"
	"testing"
	"time"
)

func TestPhaseArrivals(t *testing.T) {
	sec := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	tests := []struct {
		name   string
		p      Phase
		n      int
		points map[int]time.Duration // arrival index → offset, ± 1 µs
	}{
		{"constant", Phase{Rate: 100, Duration: time.Second}, 100, map[int]time.Duration{0: 0, 99: sec(0.99)}},
		// 0 → 200/s over 1 s: 100 arrivals; the i-th at √(i/100) s.
		{"ramp from 0", Phase{Rate: 0, To: 200, Duration: time.Second}, 100, map[int]time.Duration{1: sec(0.1), 99: sec(math.Sqrt(0.99))}},
		// 100 → 300/s over 2 s: 400 arrivals; 100t + 50t² = 100 gives
		// t = √3 − 1 for the 100th.
		{"ramp up", Phase{Rate: 100, To: 300, Duration: 2 * time.Second}, 400, map[int]time.Duration{0: 0, 100: sec(math.Sqrt(3) - 1)}},
		// 300 → 100/s: 300t − 50t² = 100 gives t = 3 − √7.
		{"ramp down", Phase{Rate: 300, To: 100, Duration: 2 * time.Second}, 400, map[int]time.Duration{100: sec(3 - math.Sqrt(7))}},
		{"idle", Phase{Rate: 0, Duration: time.Second}, 0, nil},
	}
	for _, tt := range tests {
		if got := tt.p.arrivals(); got != tt.n {
			t.Errorf("%s: %d arrivals, want %d", tt.name, got, tt.n)
			continue
		}
		prev := time.Duration(-1)
		for i := 0; i < tt.n; i++ {
			at := tt.p.at(i)
			if at <= prev || at >= tt.p.Duration {
				t.Errorf("%s: arrival %d at %v after %v, want increasing within the phase", tt.name, i, at, prev)
				break
			}
			prev = at
		}
		for i, want := range tt.points {
			if got := tt.p.at(i); absDur(got-want) > time.Microsecond {
				t.Errorf("%s: arrival %d at %v, want %v", tt.name, i, got, want)
			}
		}
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func TestRateAt(t *testing.T) {
	p := Phase{Rate: 100, To: 300, Duration: 2 * time.Second}
	for _, tt := range []struct {
		at   time.Duration
		want float64
	}{{0, 100}, {time.Second, 200}, {2 * time.Second, 300}, {3 * time.Second, 300}} {
		if got := p.rateAt(tt.at); got != tt.want {
			t.Errorf("rateAt(%v) = %v, want %v", tt.at, got, tt.want)
		}
	}
	if got := (Phase{Rate: 50, Duration: time.Second}).rateAt(time.Second / 2); got != 50 {
		t.Errorf("constant rateAt = %v, want 50", got)
	}
}
