package overload

import (
	"math"
	"testing"
	"time"
)

func TestLevelFor(t *testing.T) {
	enter := [3]float64{0.8, 0.9, 0.95}
	nan := math.NaN()
	tests := []struct {
		name  string
		prev  Level
		v     float64
		enter [3]float64
		want  Level
	}{
		{"below every threshold", Normal, 0.5, enter, Normal},
		{"at the first threshold", Normal, 0.8, enter, Elevated},
		{"jumps straight to critical", Normal, 0.99, enter, Critical},
		{"stays within the margin", High, 0.86, enter, High},
		{"leaves below the margin", High, 0.84, enter, Elevated},
		{"leaves two levels at once", Critical, 0.7, enter, Normal},
		{"does not enter within the margin from below", Elevated, 0.88, enter, Elevated},
		{"no reading is normal", Critical, nan, enter, Normal},
		{"a zero threshold is never reached", Normal, 5, [3]float64{0.8, 0, 0}, Elevated},
		{"only a critical threshold", Normal, 0.97, [3]float64{0, 0, 0.95}, Critical},
		{"only a critical threshold, below", Normal, 0.9, [3]float64{0, 0, 0.95}, Normal},
	}
	for _, tt := range tests {
		if got := levelFor(tt.prev, tt.v, tt.enter, 0.05); got != tt.want {
			t.Errorf("%s: levelFor(%v, %v) = %v, want %v", tt.name, tt.prev, tt.v, got, tt.want)
		}
	}
}

func TestHold(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		ms    int
		level Level
		want  Level
	}{
		{0, High, High},        // rises at once
		{100, Elevated, High},  // falls late
		{600, High, High},      // a bounce restarts the cooldown
		{700, Normal, High},    //
		{1600, Normal, High},   // 900 ms below
		{1700, Normal, Normal}, // 1 s below: falls to the level of the moment
		{1800, Critical, Critical},
		{1900, Elevated, Critical},
		{1400, Elevated, Critical}, // the clock went back: the cooldown restarts
		{2300, Elevated, Critical},
		{2400, Elevated, Elevated},
	}
	var h hold
	for i, s := range steps {
		h = h.step(s.level, at(s.ms), time.Second)
		if h.level != s.want {
			t.Fatalf("step %d (t=%dms, level %v): held %v, want %v", i, s.ms, s.level, h.level, s.want)
		}
	}
}

func TestShareOf(t *testing.T) {
	lo := func(v, n float64) low { return low{v: v, n: n, ok: true} }
	tests := []struct {
		name  string
		v, n  float64
		lo    low
		want  float64
		known bool
	}{
		{"no low point", 0.5, 100, low{}, 0, false},
		{"too few requests", 0.5, 3, lo(0.1, 0), 0, false},
		{"too little spread", 0.5, 100, lo(0.1, 80), 0, false},
		{"the reading did not grow", 0.5, 100, lo(0.5, 0), 0, false},
		{"slope", 0.5, 100, lo(0.1, 0), 0.004, true},
		{"slope from a low point with requests", 0.5, 100, lo(0.3, 50), 0.004, true},
		{"at most through the origin", 0.5, 100, lo(0.0, 10), 0.005, true},
		{"at least an eighth of it", 0.5, 100, lo(0.499, 0), 0.005 / 8, true},
	}
	for _, tt := range tests {
		got, known := shareOf(tt.v, tt.n, tt.lo)
		if known != tt.known || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("%s: shareOf(%v, %v, %+v) = %v, %v; want %v, %v", tt.name, tt.v, tt.n, tt.lo, got, known, tt.want, tt.known)
		}
	}
}

func TestCapFor(t *testing.T) {
	tests := []struct {
		name     string
		v, n, sh float64
		g        float64
		want     int64
	}{
		{"no reading", math.NaN(), 100, 0.004, 0.9, -1},
		{"no goal", 0.5, 100, 0.004, 0, -1},
		{"far below its goal", 0.1, 10, 0.004, 0.9, 210},
		// 0.4 of room at 0.004 a request: 100 more.
		{"the line reaches the goal", 0.5, 100, 0.004, 0.9, 200},
		{"at the goal", 0.9, 100, 0.004, 0.9, 100},
		{"above the goal", 1.0, 100, 0.004, 0.9, 75},
		{"never below the minimum", 50, 100, 0.004, 0.9, 2},
		// The share unknown: nothing below nearGoal of the goal, then the
		// requests held near where they are (through the origin).
		{"unknown share, well below the goal", 0.8, 100, 0, 0.9, -1},
		{"unknown share, near the goal", 0.85, 100, 0, 0.9, 105},
		{"unknown share, above the goal", 1.8, 100, 0, 0.9, 50},
		// Nothing in flight: all of the reading is held by something
		// else, and a few requests may show what they cost.
		{"nothing in flight", 0.85, 0, 0, 0.9, probeRoom},
		{"a tiny room", 0.89, 100, 1, 0.9, 100},
		{"a tiny room, few requests", 0.89, 1, 1, 0.9, probeRoom},
	}
	for _, tt := range tests {
		if got := capFor(tt.v, tt.n, tt.sh, tt.g, 2); got != tt.want {
			t.Errorf("%s: capFor(%v, %v, %v, %v) = %d, want %d", tt.name, tt.v, tt.n, tt.sh, tt.g, got, tt.want)
		}
	}
}

func TestParseLevel(t *testing.T) {
	for l := Off; l < NumLevels; l++ {
		b, _ := l.MarshalText()
		var got Level
		if err := got.UnmarshalText(b); err != nil || got != l {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, got, err, l)
		}
	}
	for _, bad := range []string{"", "High", "4", "critical "} {
		if l, err := ParseLevel(bad); err == nil {
			t.Errorf("ParseLevel(%q) = %v, want an error", bad, l)
		}
	}
}
