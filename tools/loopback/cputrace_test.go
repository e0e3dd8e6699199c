package loopback

import (
	"context"
	"math"
	"os"
	"testing"
	"time"
)

func TestCPUTraceAt(t *testing.T) {
	t0 := time.Unix(100, 0)
	tr := &CPUTrace{}
	for i, cpu := range []float64{1, 1.5, 1.5, 3.5} {
		tr.add(CPUSample{At: t0.Add(time.Duration(i) * time.Second), CPU: cpu})
	}
	tests := []struct {
		at     time.Duration
		want   float64
		wantOK bool
	}{
		{0, 1, true},
		{500 * time.Millisecond, 1.25, true},
		{1500 * time.Millisecond, 1.5, true},
		{2750 * time.Millisecond, 3, true},
		{3 * time.Second, 3.5, true},
		{-time.Millisecond, 0, false},
		{3001 * time.Millisecond, 0, false},
	}
	for _, tt := range tests {
		got, ok := tr.At(t0.Add(tt.at))
		if ok != tt.wantOK || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("At(+%v) = %v, %v; want %v, %v", tt.at, got, ok, tt.want, tt.wantOK)
		}
	}
	if used, ok := tr.Used(t0.Add(500*time.Millisecond), t0.Add(2750*time.Millisecond)); !ok || math.Abs(used-1.75) > 1e-9 {
		t.Errorf("Used = %v, %v; want 1.75, true", used, ok)
	}
}

// TestTraceCPU traces this process while it spins and checks that the
// trace grows and stops when asked.
func TestTraceCPU(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tr, done := TraceCPU(ctx, os.Getpid(), 10*time.Millisecond)
	end := time.Now().Add(100 * time.Millisecond)
	for time.Now().Before(end) {
	}
	cancel()
	<-done
	s := tr.Samples()
	if len(s) < 2 {
		t.Fatalf("%d samples, want ≥ 2", len(s))
	}
	for i := 1; i < len(s); i++ {
		if s[i].CPU < s[i-1].CPU || !s[i].At.After(s[i-1].At) {
			t.Fatalf("samples not increasing: %+v then %+v", s[i-1], s[i])
		}
	}
	if _, done := TraceCPU(context.Background(), -1, time.Millisecond); !closedWithin(done, time.Second) {
		t.Error("a trace of a missing process did not end")
	}
}

func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}
