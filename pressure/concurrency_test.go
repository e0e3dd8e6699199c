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

// plant is a server on virtual time: perMs arrivals every millisecond,
// each in flight for rtt (waiting on a dependency, no CPU).
type plant struct {
	c    *Concurrency
	now  time.Time
	live []time.Time // end times
}

// window runs one 100 ms window and samples the signal.
func (p *plant) window(perMs int, rtt time.Duration) {
	for range 100 {
		p.now = p.now.Add(time.Millisecond)
		kept := p.live[:0]
		for _, end := range p.live {
			if !end.After(p.now) {
				p.c.Release(rtt)
			} else {
				kept = append(kept, end)
			}
		}
		p.live = kept
		for range perMs {
			p.c.Acquire()
			p.live = append(p.live, p.now.Add(rtt))
		}
	}
	p.c.SampleAt(p.now)
}

// TestConcurrencyCatchesSlowDependency: requests arrive at 1000/s and spend
// 10 ms waiting on a dependency (≈10 in flight, nearly no CPU). The
// dependency slows to 50 ms: in flight rises to ≈50 and the gradient limit
// falls, so the signal crosses its target within a second although CPU
// would stay low.
func TestConcurrencyCatchesSlowDependency(t *testing.T) {
	for _, tt := range []struct {
		name string
		l    limit.Limiter
	}{{"gradient", limit.NewGradient()}, {"aimd", limit.NewAIMD()}} {
		p := &plant{c: NewConcurrency(tt.l, WithConcurrencySmoothing(0)), now: t0}
		for range 300 {
			p.window(1, 10*time.Millisecond)
		}
		if v := p.c.Value(); v > 0.8 {
			t.Fatalf("%s healthy: Value = %v (limit %d); want ≤ 0.8", tt.name, v, p.c.Limit())
		}
		healthy := p.c.Limit()
		crossed := -1
		for i := range 10 {
			p.window(1, 50*time.Millisecond)
			if crossed < 0 && p.c.Value() > p.c.Target() {
				crossed = i + 1
			}
		}
		if crossed < 0 {
			t.Errorf("%s: dependency 10→50 ms: Value = %v (limit %d, was %d) never above 1 in 1 s", tt.name, p.c.Value(), p.c.Limit(), healthy)
		}
		t.Logf("%s: healthy limit %d; crossed the target after %d windows; limit now %d, value %.2f", tt.name, healthy, crossed, p.c.Limit(), p.c.Value())
	}
}

// TestConcurrencyHealthyStep: three times the traffic at the same 10 ms
// RTT is not overload: the signal never crosses its target.
func TestConcurrencyHealthyStep(t *testing.T) {
	for _, tt := range []struct {
		name string
		l    limit.Limiter
	}{{"gradient", limit.NewGradient()}, {"aimd", limit.NewAIMD()}} {
		p := &plant{c: NewConcurrency(tt.l), now: t0}
		for range 300 {
			p.window(1, 10*time.Millisecond)
		}
		for i := range 50 {
			p.window(3, 10*time.Millisecond)
			if v := p.c.Value(); v > p.c.Target() {
				t.Errorf("%s: window %d after a healthy 3× step: Value = %.2f (limit %d); want ≤ 1", tt.name, i, v, p.c.Limit())
				break
			}
		}
	}
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
	if got := panicMessage(func() { NewConcurrency(nil, WithConcurrencyPeriod(time.Millisecond)) }); !strings.HasPrefix(got, "pressure: WithConcurrencyPeriod(1ms)") {
		t.Errorf("bad period panicked with %q", got)
	}
}

func TestConcurrencyAllocs(t *testing.T) {
	c := NewConcurrency(nil)
	if n := testing.AllocsPerRun(1000, func() { c.Acquire(); c.Release(time.Millisecond) }); n != 0 {
		t.Errorf("Acquire+Release allocate %v times; want 0", n)
	}
}
