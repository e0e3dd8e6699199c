package smooth

import (
	"math"
	"testing"
	"time"
)

func TestAlphaDecay(t *testing.T) {
	tests := []struct {
		name      string
		dt, tau   time.Duration
		wantAlpha float64
	}{
		{"one time constant", time.Second, time.Second, 1 - 1/math.E},
		{"three time constants", 3 * time.Second, time.Second, 1 - math.Exp(-3)},
		{"tenth", 100 * time.Millisecond, time.Second, 1 - math.Exp(-0.1)},
		{"no smoothing", time.Second, 0, 1},
		{"negative tau", time.Second, -time.Second, 1},
		{"no time", 0, time.Second, 0},
		{"time backwards", -time.Second, time.Second, 0},
		{"huge dt", time.Hour, time.Millisecond, 1},
	}
	for _, tt := range tests {
		a := Alpha(tt.dt, tt.tau)
		if math.Abs(a-tt.wantAlpha) > 1e-15 {
			t.Errorf("%s: Alpha(%v, %v) = %v, want %v", tt.name, tt.dt, tt.tau, a, tt.wantAlpha)
		}
		if d := Decay(tt.dt, tt.tau); math.Abs(d-(1-tt.wantAlpha)) > 1e-15 {
			t.Errorf("%s: Decay(%v, %v) = %v, want %v", tt.name, tt.dt, tt.tau, d, 1-tt.wantAlpha)
		}
	}
}

func TestToward(t *testing.T) {
	tests := []struct{ v, x, alpha, want float64 }{
		{0, 10, 0.5, 5},
		{10, 0, 0.25, 7.5},
		{3, 7, 0, 3},
		{3, 7, 1, 7},
		{1e20, 1, 1, 1}, // exact, although v + (x − v) would give 0
		{math.NaN(), 1, 1, 1},
	}
	for _, tt := range tests {
		if got := Toward(tt.v, tt.x, tt.alpha); got != tt.want {
			t.Errorf("Toward(%v, %v, %v) = %v, want %v", tt.v, tt.x, tt.alpha, got, tt.want)
		}
	}
}

// TestEWMAStep checks the time-constant promise: after a step the average
// has moved 63% of the way in tau, whatever the sampling interval.
func TestEWMAStep(t *testing.T) {
	for _, step := range []time.Duration{time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond} {
		e := EWMA{Tau: 200 * time.Millisecond}
		e.Update(0, 0)
		var got float64
		for at := step; at <= 200*time.Millisecond; at += step {
			got = e.Update(1, step)
		}
		if want := 1 - 1/math.E; math.Abs(got-want) > 1e-9 {
			t.Errorf("step every %v: after tau the average is %v, want %v", step, got, want)
		}
	}
}

func TestEWMA(t *testing.T) {
	var e EWMA
	if v := e.Value(); !math.IsNaN(v) {
		t.Errorf("zero EWMA: Value() = %v, want NaN", v)
	}
	if got := e.Update(5, time.Second); got != 5 {
		t.Errorf("first Update = %v, want the sample 5", got)
	}
	if got := e.Update(7, time.Second); got != 7 {
		t.Errorf("Tau 0: Update = %v, want the sample 7", got)
	}

	e = EWMA{Tau: time.Second}
	e.Update(4, 0)
	if got := e.Update(100, 0); got != 4 {
		t.Errorf("dt 0: Update = %v, want the average unchanged (4)", got)
	}
	if got := e.Update(100, -time.Second); got != 4 {
		t.Errorf("dt < 0: Update = %v, want the average unchanged (4)", got)
	}
	want := 4 + (1-math.Exp(-0.5))*96
	if got := e.Update(100, 500*time.Millisecond); got != want {
		t.Errorf("Update(100, 500ms) = %v, want %v", got, want)
	}
	if got := e.Value(); got != want {
		t.Errorf("Value() = %v, want %v", got, want)
	}
}

func BenchmarkEWMAUpdate(b *testing.B) {
	b.ReportAllocs()
	e := EWMA{Tau: 200 * time.Millisecond}
	var x float64
	for b.Loop() {
		x = e.Update(x+1, 50*time.Millisecond)
	}
	_ = x
}
