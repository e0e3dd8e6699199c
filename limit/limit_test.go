package limit

import (
	"fmt"
	"math"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// drive feeds n windows of 100 ms with the given RTT; the server keeps the
// limit fully used when busy is true.
func drive(l Limiter, now *time.Time, n int, rtt time.Duration, busy bool) {
	for range n {
		*now = now.Add(100 * time.Millisecond)
		inflight := 1
		if busy {
			inflight = l.Limit()
		}
		l.Update(*now, rtt, inflight)
	}
}

func TestGradientSlowDependency(t *testing.T) {
	for _, tt := range []struct {
		name string
		l    Limiter
	}{
		{"gradient", NewGradient()},
		{"aimd", NewAIMD()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			drive(tt.l, &now, 300, 10*time.Millisecond, true)
			healthy := tt.l.Limit()
			if healthy < 100 {
				t.Fatalf("after 30 s of healthy 10 ms RTT with the limit in use, limit = %d; want ≥ 100", healthy)
			}
			// The dependency slows down 5×: within 2 s (20 windows) the
			// limit must have fallen at least by half.
			drive(tt.l, &now, 20, 50*time.Millisecond, true)
			if got := tt.l.Limit(); got > healthy/2 {
				t.Errorf("2 s after RTT went 10→50 ms, limit = %d; want ≤ %d (half of %d)", got, healthy/2, healthy)
			}
		})
	}
}

func TestAppLimitedDoesNotGrow(t *testing.T) {
	for _, tt := range []struct {
		name string
		l    Limiter
	}{
		{"gradient", NewGradient()},
		{"aimd", NewAIMD()},
	} {
		now := t0
		drive(tt.l, &now, 100, 10*time.Millisecond, false)
		if got := tt.l.Limit(); got != 20 {
			t.Errorf("%s: with 1 request in flight and limit 20, limit became %d; want 20 (no evidence for more)", tt.name, got)
		}
	}
}

func TestGradientBounds(t *testing.T) {
	g := NewGradient(WithMinLimit(5), WithMaxLimit(50), WithInitialLimit(10))
	now := t0
	drive(g, &now, 500, 10*time.Millisecond, true)
	if got := g.Limit(); got != 50 {
		t.Errorf("healthy for long: limit = %d; want max 50", got)
	}
	drive(g, &now, 40, time.Second, true)
	if got := g.Limit(); got > 6 {
		t.Errorf("4 s after RTT went 10 ms → 1 s: limit = %d; want ≤ 6 (min 5 plus the √limit probe)", got)
	}
	// Recovery: the long average drifts back and the limit grows again.
	drive(g, &now, 600, 10*time.Millisecond, true)
	if got := g.Limit(); got != 50 {
		t.Errorf("healthy again for 60 s: limit = %d; want 50", got)
	}
	g.Update(now, 0, 50)
	g.Update(now, -time.Second, 50)
	if got := g.Limit(); got != 50 {
		t.Errorf("non-positive RTTs changed the limit to %d", got)
	}
}

// driveAt feeds n windows of 100 ms with the given RTT and peak in flight.
func driveAt(l Limiter, now *time.Time, n int, rtt time.Duration, inflight int) {
	for range n {
		*now = now.Add(100 * time.Millisecond)
		l.Update(*now, rtt, inflight)
	}
}

func TestAIMD(t *testing.T) {
	a := NewAIMD(WithInitialLimit(10), WithMinLimit(2))
	now := t0
	driveAt(a, &now, 5, 10*time.Millisecond, 7)
	if got := a.Limit(); got != 15 {
		t.Errorf("5 healthy windows from 10 with 7 in flight: limit = %d; want 15 (+1 per window)", got)
	}
	if got := a.Threshold(); got != 15*time.Millisecond {
		t.Errorf("Threshold = %v; want 1.5 × 10 ms min RTT", got)
	}
	driveAt(a, &now, 1, 20*time.Millisecond, 8)
	if got := a.Limit(); got != 13 {
		t.Errorf("one slow window from 15: limit = %d; want floor(15 × 0.9) = 13", got)
	}
	// A dependency that stays at 20 ms becomes the new baseline after at
	// most two MinRTTWindows (30 s each): no more decreases.
	driveAt(a, &now, 700, 20*time.Millisecond, 8)
	if got := a.Threshold(); got != 30*time.Millisecond {
		t.Errorf("after 70 s at 20 ms: Threshold = %v; want 30ms", got)
	}
	before := a.Limit()
	driveAt(a, &now, 10, 20*time.Millisecond, 8)
	if got := a.Limit(); got < before {
		t.Errorf("at the new 20 ms baseline the limit still falls: %d → %d", before, got)
	}
	fixed := NewAIMD(WithThreshold(100 * time.Millisecond))
	driveAt(fixed, &now, 3, 90*time.Millisecond, 12)
	if got := fixed.Limit(); got != 23 {
		t.Errorf("fixed threshold 100 ms, RTT 90 ms: limit = %d; want 23", got)
	}
}

// TestFollowDemand: three times the requests at the same healthy RTT is
// not overload; after one window the limit leaves Tolerance of headroom
// above the new peak, and a slow window never does.
func TestFollowDemand(t *testing.T) {
	for _, tt := range []struct {
		name string
		l    Limiter
	}{{"gradient", NewGradient()}, {"aimd", NewAIMD()}} {
		now := t0
		driveAt(tt.l, &now, 300, 10*time.Millisecond, 10)
		driveAt(tt.l, &now, 1, 10*time.Millisecond, 30)
		if got := tt.l.Limit(); got < 45 {
			t.Errorf("%s: one healthy window with 30 in flight: limit = %d; want ≥ 45 (1.5 × 30)", tt.name, got)
		}
		before := tt.l.Limit()
		driveAt(tt.l, &now, 1, 100*time.Millisecond, 300)
		if got := tt.l.Limit(); got >= before {
			t.Errorf("%s: a 10× slower window with 300 in flight raised the limit %d → %d", tt.name, before, got)
		}
	}
}

func TestBadOptions(t *testing.T) {
	tests := []struct {
		opts []Option
		want string
	}{
		{[]Option{WithMinLimit(-1)}, "limit: WithMinLimit(-1): must be in [1, max limit] (0 means the default, 4)"},
		{[]Option{WithMaxLimit(-1)}, "limit: WithMaxLimit(-1): must be in [min limit, 1e9] (0 means the default, 1000)"},
		{[]Option{WithMaxLimit(2e9)}, "limit: WithMaxLimit(2000000000): must be in [min limit, 1e9] (0 means the default, 1000)"},
		{[]Option{WithTolerance(0.5)}, "limit: WithTolerance(0.5): must be in [1, 100] (0 means the default, 1.5)"},
		{[]Option{WithTolerance(math.NaN())}, "limit: WithTolerance(NaN): must be in [1, 100] (0 means the default, 1.5)"},
		{[]Option{WithSmoothing(-0.2)}, "limit: WithSmoothing(-0.2): must be in (0, 1] (0 means the default, 0.2)"},
		{[]Option{WithLongWindow(-1)}, "limit: WithLongWindow(-1): must be in [1, 1e6] (0 means the default, 600)"},
		{[]Option{WithBackoff(1)}, "limit: WithBackoff(1): must be in [0.1, 1) (0 means the default, 0.9)"},
		{[]Option{WithThreshold(-time.Second)}, "limit: WithThreshold(-1s): must be in [0, 1h] (0 means adaptive)"},
		{[]Option{WithMinRTTWindow(-time.Second)}, "limit: WithMinRTTWindow(-1s): must be in [1ms, 24h] (0 means the default, 30s)"},
		{[]Option{WithInitialLimit(2000)}, "limit: WithInitialLimit(2000): must be in [min limit 4, max limit 1000]"},
		{[]Option{WithMinLimit(10), WithMaxLimit(5)}, "limit: WithMinLimit(10): must be ≤ the max limit 5"},
	}
	for _, tt := range tests {
		for _, ctor := range []func(...Option) Limiter{
			func(o ...Option) Limiter { return NewGradient(o...) },
			func(o ...Option) Limiter { return NewAIMD(o...) },
		} {
			got := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				ctor(tt.opts...)
				return "no panic"
			}()
			if got != tt.want {
				t.Errorf("panic = %q, want %q", got, tt.want)
			}
		}
	}
}

// TestOptionDefaults checks that zero means the default, and that the
// defaults of the initial, min and max limits give way to a given one.
func TestOptionDefaults(t *testing.T) {
	tests := []struct {
		name                string
		opts                []Option
		initial, min, limit int
	}{
		{"none", nil, 20, 4, 1000},
		{"zeros", []Option{WithInitialLimit(0), WithMinLimit(0), WithMaxLimit(0), WithTolerance(0),
			WithSmoothing(0), WithLongWindow(0), WithBackoff(0), WithMinRTTWindow(0)}, 20, 4, 1000},
		{"max below the default initial", []Option{WithMaxLimit(10)}, 10, 4, 10},
		{"max below the default min", []Option{WithMaxLimit(2)}, 2, 2, 2},
		{"min above the default initial", []Option{WithMinLimit(50)}, 50, 50, 1000},
		{"min above the default max", []Option{WithMinLimit(5000)}, 5000, 5000, 5000},
	}
	for _, tt := range tests {
		p := build(tt.opts)
		if p.initial != tt.initial || p.min != tt.min || p.max != tt.limit {
			t.Errorf("%s: initial %d min %d max %d, want %d %d %d", tt.name, p.initial, p.min, p.max, tt.initial, tt.min, tt.limit)
		}
		if d := defaults(); tt.name == "zeros" && (p.tolerance != d.tolerance || p.smoothing != d.smoothing ||
			p.longWindow != d.longWindow || p.backoff != d.backoff || p.minRTTWindow != d.minRTTWindow) {
			t.Errorf("zeros: %+v, want the defaults %+v", p, d)
		}
	}
}

func BenchmarkUpdate(b *testing.B) {
	for _, bb := range []struct {
		name string
		l    Limiter
	}{{"gradient", NewGradient()}, {"aimd", NewAIMD()}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			now := t0
			for i := range b.N {
				now = now.Add(100 * time.Millisecond)
				bb.l.Update(now, time.Duration(10+i%7)*time.Millisecond, bb.l.Limit())
			}
		})
	}
}
