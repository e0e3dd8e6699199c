package pressure

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee/limit"
)

// stubLimiter records its updates and returns a fixed limit.
type stubLimiter struct {
	limit   int
	updates []struct {
		rtt      time.Duration
		inflight int
	}
}

func (s *stubLimiter) Limit() int { return s.limit }
func (s *stubLimiter) Update(_ time.Time, rtt time.Duration, inflight int) {
	s.updates = append(s.updates, struct {
		rtt      time.Duration
		inflight int
	}{rtt, inflight})
}

func TestConcurrencyWindow(t *testing.T) {
	l := &stubLimiter{limit: 10}
	c := NewConcurrency(l, WithConcurrencySmoothing(0))
	for range 8 {
		c.Acquire()
	}
	for range 4 {
		c.Release(30 * time.Millisecond)
	}
	c.Release(10 * time.Millisecond)
	c.Release(0) // no latency sample
	c.SampleAt(t0)
	r := c.Reading()
	if len(l.updates) != 1 || l.updates[0].rtt != 26*time.Millisecond || l.updates[0].inflight != 8 {
		t.Errorf("limiter updates = %+v; want one with mean RTT 26ms and peak 8", l.updates)
	}
	if c.Value() != 0.8 || r.Peak != 8 || r.Samples != 5 || c.InFlight() != 2 {
		t.Errorf("Value = %v, reading %+v, in flight %d; want 0.8, peak 8, 5 samples, 2 in flight", c.Value(), r, c.InFlight())
	}
	// Next window: nothing ended; the peak restarts from the 2 still in
	// flight and the limiter is not updated without an RTT.
	c.SampleAt(t0.Add(100 * time.Millisecond))
	if len(l.updates) != 1 || c.Value() != 0.2 {
		t.Errorf("quiet window: %d updates, Value %v; want 1 and 0.2", len(l.updates), c.Value())
	}
}

// TestConcurrencyCatchesSlowDependency: requests arrive at 1000/s and spend
// 10 ms waiting on a dependency (≈10 in flight, nearly no CPU). The
// dependency slows to 50 ms: in flight rises to ≈50 and the gradient limit
// falls, so the signal crosses its target within a second although CPU
// would stay low.
func TestConcurrencyCatchesSlowDependency(t *testing.T) {
	c := NewConcurrency(limit.NewGradient(), WithConcurrencySmoothing(0))
	now := t0
	type req struct{ end time.Time }
	var live []req
	step := func(rtt time.Duration) {
		// One window of 100 ms in 1 ms ticks: one arrival per ms.
		for range 100 {
			now = now.Add(time.Millisecond)
			kept := live[:0]
			for _, r := range live {
				if !r.end.After(now) {
					c.Release(rtt)
				} else {
					kept = append(kept, r)
				}
			}
			live = kept
			c.Acquire()
			live = append(live, req{end: now.Add(rtt)})
		}
		c.SampleAt(now)
	}
	for range 300 {
		step(10 * time.Millisecond)
	}
	if v := c.Value(); v > 0.8 {
		t.Fatalf("healthy: Value = %v (limit %d); want ≤ 0.8", v, c.Limit())
	}
	healthy := c.Limit()
	crossed := -1
	for i := range 10 {
		step(50 * time.Millisecond)
		if crossed < 0 && c.Value() > c.Target() {
			crossed = i + 1
		}
	}
	if crossed < 0 {
		t.Errorf("dependency 10→50 ms: Value = %v (limit %d, was %d) never above 1 in 1 s", c.Value(), c.Limit(), healthy)
	}
	t.Logf("healthy limit %d; crossed the target after %d windows; limit now %d, value %.2f", healthy, crossed, c.Limit(), c.Value())
}

func TestConcurrencyParallel(t *testing.T) {
	c := NewConcurrency(nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Acquire()
				c.Release(time.Millisecond)
			}
		})
	}
	wg.Wait()
	c.SampleAt(t0)
	if c.InFlight() != 0 || c.Reading().Samples != 8000 || math.IsNaN(c.Value()) {
		t.Errorf("after balanced Acquire/Release: in flight %d, samples %d, value %v", c.InFlight(), c.Reading().Samples, c.Value())
	}
	if c.Name() != "concurrency" || c.Target() != 1 {
		t.Errorf("Name %q Target %v", c.Name(), c.Target())
	}
	if got := panicMessage(func() { NewConcurrency(nil, WithConcurrencyPeriod(0)) }); !strings.HasPrefix(got, "pressure: WithConcurrencyPeriod(0s)") {
		t.Errorf("bad period panicked with %q", got)
	}
}

func TestConcurrencyAllocs(t *testing.T) {
	c := NewConcurrency(nil)
	if n := testing.AllocsPerRun(1000, func() { c.Acquire(); c.Release(time.Millisecond) }); n != 0 {
		t.Errorf("Acquire+Release allocate %v times; want 0", n)
	}
}
