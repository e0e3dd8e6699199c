package proxy

import (
	"fmt"
	"testing"
	"time"
)

func testBackends(n int) []*backend {
	p := testLimitParams()
	set := make([]*backend, n)
	for i := range set {
		set[i] = &backend{addr: fmt.Sprintf("10.0.0.%d:80", i+1), lim: newAdaptiveLimit(p, 1)}
	}
	return set
}

func testRotationParams() rotationParams {
	c := DefaultConfig()
	c.Health.Path = "/healthz"
	return compile(c, nil).loop.rot
}

// TestRotateCap: however many backends fail, at most ⌊share × n⌋ are
// ejected; the others stay in, capped.
func TestRotateCap(t *testing.T) {
	tests := []struct {
		n, failing int
		share      float64
		want       int
	}{
		{3, 1, 0.5, 1}, {3, 2, 0.5, 1}, {3, 3, 0.5, 1},
		{4, 3, 0.5, 2}, {10, 10, 0.5, 5}, {10, 2, 0.5, 2},
		{1, 1, 0.5, 0}, {2, 2, 0.5, 1}, {10, 10, 0, 0}, {10, 10, 1, 10},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("n=%d/failing=%d/share=%g", tt.n, tt.failing, tt.share), func(t *testing.T) {
			p := testRotationParams()
			p.maxShare = tt.share
			set := testBackends(tt.n)
			for i := range tt.failing {
				set[i].consec.Store(int64(p.consecutive + i))
			}
			now := time.Unix(100, 0)
			rotate(set, &p, now)
			ejected, capped := 0, 0
			for _, b := range set {
				if b.rot.ejected {
					ejected++
				}
				if b.rot.capped {
					capped++
				}
			}
			if ejected != tt.want || capped != tt.failing-tt.want {
				t.Errorf("ejected %d, capped %d; want %d, %d", ejected, capped, tt.want, tt.failing-tt.want)
			}
			// Again: the cap counts those already out.
			rotate(set, &p, now.Add(time.Millisecond))
			ejected = 0
			for _, b := range set {
				if b.rot.ejected {
					ejected++
				}
			}
			if ejected != tt.want {
				t.Errorf("second step: ejected %d, want %d", ejected, tt.want)
			}
		})
	}
}

// TestRotateOrder: the strongest evidence goes first: failed health
// checks, then the most consecutive failures.
func TestRotateOrder(t *testing.T) {
	p := testRotationParams()
	set := testBackends(4) // cap 2
	set[0].consec.Store(int64(p.consecutive))
	set[1].consec.Store(int64(p.consecutive + 10))
	set[2].health.failRun.Store(int64(p.unhealthy))
	set[3].consec.Store(int64(p.consecutive + 5))
	rotate(set, &p, time.Unix(1, 0))
	got := ""
	for _, b := range set {
		if b.rot.ejected {
			got += b.addr + "(" + b.rot.cause.String() + ") "
		}
	}
	want := "10.0.0.2:80(outlier) 10.0.0.3:80(health) "
	if got != want {
		t.Errorf("ejected %q, want %q", got, want)
	}
}

// TestRotateReturn: an ejection lasts base × 2^(n−1) up to the max; with
// active checks the backend returns only once they pass again; it returns
// ramped, with its limit reset and its failures forgotten; long enough in
// rotation, its ejections are forgotten too.
func TestRotateReturn(t *testing.T) {
	p := testRotationParams()
	set := testBackends(2)
	b := set[0]
	t0 := time.Unix(1000, 0)
	now := t0
	for i, want := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second} {
		b.consec.Store(int64(p.consecutive))
		rotate(set, &p, now)
		if !b.rot.ejected || b.rot.until.Sub(now) != want {
			t.Fatalf("ejection %d: ejected=%v for %v, want %v", i+1, b.rot.ejected, b.rot.until.Sub(now), want)
		}
		b.lim.limit = 77
		// Time up, but the checks still fail: stays out.
		b.health.record(checkFailed)
		now = b.rot.until
		rotate(set, &p, now)
		if !b.rot.ejected {
			t.Fatalf("ejection %d: returned while its checks fail", i+1)
		}
		b.health.record(checkHealthy)
		b.health.record(checkOverloaded) // alive and busy counts as passing
		rotate(set, &p, now)
		if b.rot.ejected || !b.rot.back.Equal(now) || b.consec.Load() != 0 || b.lim.value() != testLimitParams().initial {
			t.Fatalf("ejection %d: after passing checks ejected=%v back=%v consec=%d limit=%d", i+1, b.rot.ejected, b.rot.back, b.consec.Load(), b.lim.value())
		}
	}
	if got := ejectionFor(20, p.baseEject, p.maxEject); got != p.maxEject {
		t.Errorf("ejectionFor(20) = %v, want the max %v", got, p.maxEject)
	}
	rotate(set, &p, now.Add(p.maxEject))
	if b.rot.ejections != 0 {
		t.Errorf("ejections = %d after %v in rotation, want 0", b.rot.ejections, p.maxEject)
	}
}

// TestOverloadNeverEjects: timeouts, 503s and checks that time out while
// the backend answers are overload, never a reason to eject.
func TestOverloadNeverEjects(t *testing.T) {
	p := testRotationParams()
	set := testBackends(3)
	now := time.Unix(1, 0)
	for range 1000 {
		for _, b := range set {
			b.observe(overloaded, time.Second)
			b.health.record(checkOverloaded)
		}
		rotate(set, &p, now)
		now = now.Add(100 * time.Millisecond)
	}
	for _, b := range set {
		if b.rot.ejected || b.rot.capped {
			t.Errorf("%s: ejected=%v capped=%v after only overload", b.addr, b.rot.ejected, b.rot.capped)
		}
	}
}

func TestSlowStartWeight(t *testing.T) {
	t0 := time.Unix(100, 0)
	tests := []struct {
		el     time.Duration
		window time.Duration
		want   float64
	}{
		{0, 30 * time.Second, 0.1},
		{15 * time.Second, 30 * time.Second, 0.55},
		{30 * time.Second, 30 * time.Second, 1},
		{time.Hour, 30 * time.Second, 1},
		{-time.Second, 30 * time.Second, 0.1}, // clock step back
		{5 * time.Second, 0, 1},               // off
	}
	for _, tt := range tests {
		if got := slowStartWeight(t0.Add(tt.el), t0, tt.window, 0.1); got < tt.want-1e-9 || got > tt.want+1e-9 {
			t.Errorf("slowStartWeight(%v of %v) = %v, want %v", tt.el, tt.window, got, tt.want)
		}
	}
	if got := slowStartWeight(t0, time.Time{}, time.Minute, 0.1); got != 1 {
		t.Errorf("never ejected: weight %v, want 1", got)
	}
}
