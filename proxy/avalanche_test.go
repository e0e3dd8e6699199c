package proxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
)

// loadResult counts a load's requests by criticality: sent, and
// succeeded with their completion times.
type loadResult struct {
	mu   sync.Mutex
	sent [levee.NumCriticalities]int
	ok   [levee.NumCriticalities][]time.Time
}

func (r *loadResult) goodput(from, to time.Time) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for c := range r.ok {
		for _, t := range r.ok[c] {
			if !t.Before(from) && t.Before(to) {
				n++
			}
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

func (r *loadResult) success(c levee.Criticality) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sent[c] == 0 {
		return 1
	}
	return float64(len(r.ok[c])) / float64(r.sent[c])
}

// openLoad sends Poisson arrivals at rate per second for d through naive
// clients (attempts tries, timeout each), half CRITICAL and half
// SHEDDABLE, and waits for all of them.
func openLoad(fl *fleet, rate float64, d time.Duration, attempts int, timeout time.Duration, seed uint64) *loadResult {
	res := &loadResult{}
	rng := rand.New(rand.NewPCG(seed, 3))
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; ; i++ {
		time.Sleep(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if time.Since(start) >= d {
			break
		}
		c := levee.Critical
		if i%2 == 1 {
			c = levee.Sheddable
		}
		res.mu.Lock()
		res.sent[c]++
		res.mu.Unlock()
		wg.Go(func() {
			if fl.naiveClient(c, attempts, timeout) {
				res.mu.Lock()
				res.ok[c] = append(res.ok[c], time.Now())
				res.mu.Unlock()
			}
		})
	}
	wg.Wait()
	return res
}

func avalancheConfig() *Config {
	cfg := DefaultConfig()
	cfg.Health.Path = "/healthz"
	cfg.Health.Every = time.Second
	cfg.Health.Timeout = 500 * time.Millisecond
	return cfg
}

// TestAvalancheAvoided is the founding text's failover cascade on virtual
// time: three backends of fixed capacity (5 workers × 50 ms = 100/s each)
// whose health checks wait in the same queue as their traffic, offered
// 1.2× their total capacity by naive clients that retry at once, half
// CRITICAL and half SHEDDABLE. Nothing is ejected, goodput stays near
// capacity, every backend serves its share, and CRITICAL requests all
// succeed: the excess is shed at the edge, SHEDDABLE first.
func TestAvalancheAvoided(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bs []*fakeBackend
		for i := range 3 {
			bs = append(bs, newFakeBackend(fmt.Sprintf("10.0.0.%d:80", i+1), 5, 50*time.Millisecond))
		}
		fl := newFleet(t, avalancheConfig(), bs...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { fl.h.Run(ctx); close(done) }()

		const capacity = 300.0
		start := time.Now()
		res := openLoad(fl, 1.2*capacity, 30*time.Second, 3, 2*time.Second, 1)
		cancel()
		<-done
		time.Sleep(time.Minute) // the backends finish the work they queued

		if ej := fl.logs.events("proxy: backend ejected", ""); len(ej) > 0 {
			t.Errorf("%d ejections, want none: overload is not failure", len(ej))
		}
		gp := res.goodput(start.Add(10*time.Second), start.Add(30*time.Second))
		if gp < 0.85*capacity {
			t.Errorf("goodput %.0f/s, want ≥ %.0f/s (0.85 of capacity)", gp, 0.85*capacity)
		}
		if s := res.success(levee.Critical); s < 0.99 {
			t.Errorf("CRITICAL success %.4f, want ≥ 0.99", s)
		}
		var total int64
		for _, b := range bs {
			total += b.served.Load()
		}
		for _, b := range bs {
			if share := float64(b.served.Load()) / float64(total); share < 0.25 {
				t.Errorf("%s served %.2f of the requests, want ≥ 0.25 (all in rotation)", b.addr, share)
			}
		}
		t.Logf("goodput %.0f/s of %.0f; success CRITICAL %.4f SHEDDABLE %.4f; proxy answers %v",
			gp, capacity, res.success(levee.Critical), res.success(levee.Sheddable), fl.h.Status().Answers)
	})
}

// TestKilledBackend: one of three backends is killed under 0.6× load: it
// is ejected within 2 s (its share moves to the others), no request is
// sent or retried to it once ejected, and when it comes back it is ramped
// in over the slow-start window rather than flooded.
func TestKilledBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bs []*fakeBackend
		for i := range 3 {
			bs = append(bs, newFakeBackend(fmt.Sprintf("10.0.0.%d:80", i+1), 5, 50*time.Millisecond))
		}
		cfg := avalancheConfig()
		cfg.Balance.SlowStart = 10 * time.Second
		fl := newFleet(t, cfg, bs...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { fl.h.Run(ctx); close(done) }()

		start := time.Now()
		victim := bs[0]
		go func() {
			time.Sleep(10 * time.Second)
			victim.dead.Store(true)
			time.Sleep(20 * time.Second)
			victim.dead.Store(false)
		}()
		res := openLoad(fl, 180, 60*time.Second, 3, 2*time.Second, 2)
		cancel()
		<-done
		time.Sleep(time.Minute) // the backends finish the work they queued

		kill, revive := start.Add(10*time.Second), start.Add(30*time.Second)
		ej := fl.logs.events("proxy: backend ejected", victim.addr)
		if len(ej) == 0 {
			t.Fatalf("the killed backend was never ejected")
		}
		if d := ej[0].Sub(kill); d > 2*time.Second {
			t.Errorf("ejected %v after the kill, want ≤ 2s", d)
		}
		if n := victim.between(&victim.refusedAt, ej[0], revive); n > 0 {
			t.Errorf("%d requests sent to the killed backend after its ejection, want 0", n)
		}
		if s := res.success(levee.Critical); s < 0.99 {
			t.Errorf("CRITICAL success %.4f, want ≥ 0.99", s)
		}
		back := fl.logs.events("proxy: backend back in rotation; ramping", victim.addr)
		if len(back) == 0 || back[0].Before(revive) {
			t.Fatalf("return events %v, want one after the revival at %v", back, revive)
		}
		// Ramped: its share in the first seconds back is well below its
		// share once the window has passed.
		r0 := back[0]
		early := victim.between(&victim.startedAt, r0, r0.Add(2*time.Second))
		late := victim.between(&victim.startedAt, r0.Add(15*time.Second), r0.Add(17*time.Second))
		if late == 0 || float64(early) > 0.5*float64(late) {
			t.Errorf("started in its first 2 s back %d, 15 s later %d: want a ramp (early ≤ half of late)", early, late)
		}
		t.Logf("ejected %v after the kill, back %v after the revival; first 2 s back %d requests, 15 s later %d; success %.4f",
			ej[0].Sub(kill), r0.Sub(revive), early, late, res.success(levee.Critical))
	})
}

// TestLeveeBackendsOverloaded: backends that answer 503 overloaded (and
// report Levee-Load) when their queue is long, offered 1.2× their capacity:
// their rejections back the proxy's limits off instead of ejecting them;
// the excess is shed at the edge, SHEDDABLE first.
func TestLeveeBackendsOverloaded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var bs []*fakeBackend
		for i := range 3 {
			b := newFakeBackend(fmt.Sprintf("10.0.0.%d:80", i+1), 5, 50*time.Millisecond)
			b.rejectAbove, b.jitter = 5, true
			bs = append(bs, b)
		}
		fl := newFleet(t, avalancheConfig(), bs...)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { fl.h.Run(ctx); close(done) }()
		start := time.Now()
		res := openLoad(fl, 360, 30*time.Second, 3, 2*time.Second, 3)
		cancel()
		<-done
		time.Sleep(time.Minute)

		if ej := fl.logs.events("proxy: backend ejected", ""); len(ej) > 0 {
			t.Errorf("%d ejections, want none: a backend that says it is overloaded is not failed", len(ej))
		}
		var rejected int64
		for _, b := range bs {
			rejected += b.rejected.Load()
		}
		gp := res.goodput(start.Add(10*time.Second), start.Add(30*time.Second))
		if gp < 0.85*300 || res.success(levee.Critical) < 0.99 {
			t.Errorf("goodput %.0f/s (want ≥ 255), CRITICAL %.4f (want ≥ 0.99)", gp, res.success(levee.Critical))
		}
		t.Logf("goodput %.0f/s of 300; CRITICAL %.4f, SHEDDABLE %.4f; backends rejected %d; proxy answers %v",
			gp, res.success(levee.Critical), res.success(levee.Sheddable), rejected, fl.h.Status().Answers)
	})
}
