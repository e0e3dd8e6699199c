package admit

import (
	"math"
	"testing"
	"time"
)

// TestGCRAExtremeLimits: a limit's rate and burst come from configuration
// and from the Go API unchecked; the bucket built from them must do what
// they say at both ends, never wrap.
func TestGCRAExtremeLimits(t *testing.T) {
	now := time.Unix(1_700_000_000, 0).UnixNano()
	t.Run("a tiny rate admits one and then waits", func(t *testing.T) {
		g := newGCRA(Limit{Rate: 1e-12, Burst: 1})
		if _, ok := g.take(now); !ok {
			t.Fatal("the first request was refused by a full bucket")
		}
		wait, ok := g.take(now + int64(time.Hour))
		if ok || wait < int64(24*time.Hour) {
			t.Errorf("second request an hour later: ok %v, wait %v; want refused with a wait of years", ok, time.Duration(wait))
		}
	})
	t.Run("a huge burst of a tiny rate does not wrap", func(t *testing.T) {
		g := newGCRA(Limit{Rate: 1e-12, Burst: math.MaxInt})
		if g.interval != maxInterval || g.tau != maxSpan {
			t.Fatalf("interval %d, tau %d: want the bounds %d and %d", g.interval, g.tau, maxInterval, maxSpan)
		}
		n := 0
		for range 2000 {
			if _, ok := g.take(now); ok {
				n++
			}
		}
		if want := int(maxSpan/maxInterval) + 1; n != want {
			t.Errorf("admitted %d at one instant, want %d (the bounded burst)", n, want)
		}
	})
	t.Run("a burst of a billion at 1/s is whole", func(t *testing.T) {
		g := newGCRA(Limit{Rate: 1, Burst: 1_000_000_000})
		if g.tau != (1_000_000_000-1)*int64(time.Second) {
			t.Errorf("tau %d, want (10⁹−1) s", g.tau)
		}
	})
	t.Run("a huge rate admits at once", func(t *testing.T) {
		g := newGCRA(Limit{Rate: 1e15, Burst: 1})
		if g.interval != 1 {
			t.Errorf("interval %d ns, want 1", g.interval)
		}
		if _, ok := g.take(now); !ok {
			t.Error("refused")
		}
	})
	t.Run("an ordinary limit", func(t *testing.T) {
		g := newGCRA(Limit{Rate: 10, Burst: 3})
		if g.interval != int64(100*time.Millisecond) || g.tau != int64(200*time.Millisecond) {
			t.Fatalf("interval %v tau %v, want 100ms and 200ms", time.Duration(g.interval), time.Duration(g.tau))
		}
		n := 0
		for range 10 {
			if _, ok := g.take(now); ok {
				n++
			}
		}
		if n != 3 {
			t.Errorf("admitted %d at one instant, want the burst of 3", n)
		}
	})
}
