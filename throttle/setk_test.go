package throttle

import (
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// TestSetK checks that a changed K moves the steady state: a backend
// that accepts at most 10 requests a second receives about K times what it
// accepts.
func TestSetK(t *testing.T) {
	ratio := func(th *Throttle, start time.Time) float64 {
		// 100 requests a second for 60 s; the backend accepts one request
		// per 100 ms. Count what is sent over the last 30 s.
		var total, accepted int
		var lastAcc time.Time
		for i := range 6000 {
			now := start.Add(time.Duration(i) * 10 * time.Millisecond)
			if th.AllowAt(now, levee.Critical) != nil {
				continue
			}
			if i >= 3000 {
				total++
			}
			ok := now.Sub(lastAcc) >= 100*time.Millisecond
			if ok {
				lastAcc = now
				if i >= 3000 {
					accepted++
				}
			}
			th.DoneAt(now, levee.Critical, ok)
		}
		return float64(total) / float64(accepted)
	}
	t0 := time.Unix(1000, 0)
	th := New(WithK(2), WithWindow(10*time.Second))
	base := ratio(th, t0)
	if err := th.SetK(1.1); err != nil {
		t.Fatal(err)
	}
	if got := th.K(); got != 1.1 {
		t.Fatalf("K() = %v, want 1.1", got)
	}
	lower := ratio(th, t0.Add(time.Minute))
	t.Logf("sent ÷ accepted: %.2f with K 2, %.2f with K 1.1", base, lower)
	if !(base > 1.7 && base < 2.3 && lower > 0.95 && lower < 1.25) {
		t.Errorf("sent ÷ accepted = %.2f with K 2, %.2f with K 1.1: want about 2 and 1.1", base, lower)
	}
	for _, k := range []float64{0.5, -1} {
		if err := th.SetK(k); err == nil {
			t.Errorf("SetK(%v): no error", k)
		}
	}
	if got := th.K(); got != 1.1 {
		t.Errorf("K() after refused changes = %v, want 1.1", got)
	}
}

func TestGroupSetK(t *testing.T) {
	g := NewGroup()
	a := g.Get("a")
	if err := g.SetK(3); err != nil {
		t.Fatal(err)
	}
	b := g.Get("b")
	for name, th := range map[string]*Throttle{"existing": a, "new": b} {
		if got := th.K(); got != 3 {
			t.Errorf("%s throttle K = %v, want 3", name, got)
		}
	}
}
