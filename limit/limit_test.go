package limit

import (
	"fmt"
	"strings"
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
		opt  Option
		want string
	}{
		{WithMinLimit(0), "WithMinLimit(0)"},
		{WithMaxLimit(-1), "WithMaxLimit(-1)"},
		{WithTolerance(0.5), "WithTolerance(0.5)"},
		{WithSmoothing(0), "WithSmoothing(0)"},
		{WithLongWindow(0), "WithLongWindow(0)"},
		{WithBackoff(1), "WithBackoff(1)"},
		{WithThreshold(-time.Second), "WithThreshold(-1s)"},
		{WithMinRTTWindow(0), "WithMinRTTWindow(0s)"},
		{WithInitialLimit(2000), "initial limit 2000 outside"},
		{func(p *params) { p.min, p.max = 10, 5 }, "min limit 10 above max limit 5"},
	}
	for _, tt := range tests {
		for _, ctor := range []func(...Option) Limiter{
			func(o ...Option) Limiter { return NewGradient(o...) },
			func(o ...Option) Limiter { return NewAIMD(o...) },
		} {
			got := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				ctor(tt.opt)
				return ""
			}()
			if !strings.HasPrefix(got, "limit: ") || !strings.Contains(got, tt.want) {
				t.Errorf("panic = %q; want a limit: message containing %q", got, tt.want)
			}
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
