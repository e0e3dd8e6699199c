package admit_test

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestSingleTenantFlood: every request comes from one tenant, as when all
// clients sit behind one address (a load balancer, or loopback) and the
// tenant is the peer address. When the flood starts, that tenant's
// smoothed rate must not trail the arrivals so far that the plan believes
// the flood comes from others and sheds the tenant — that is, everyone —
// entirely.
func TestSingleTenantFlood(t *testing.T) {
	const c0 = 1000.0
	for _, load := range []float64{2, 5, 10} {
		for _, seed := range testSeeds() {
			t.Run(fmt.Sprintf("%gC/seed%d", load, seed), func(t *testing.T) {
				run := func(ctx context.Context) ([]window, *plant) {
					p := newPlant(c0, seed)
					s := oneSource(p, seed, ctx, steps([]time.Duration{0, 3 * time.Second}, []float64{0.5 * c0, load * c0}))
					s.run(3*time.Second, time.Second)
					return s.run(4*time.Second, 100*time.Millisecond), p
				}
				one, p := run(oneTenant)
				none, _ := run(context.Background())
				var a1, a0 float64
				for i, w := range one {
					a1 += w.admitted
					a0 += none[i].admitted
					// From 2 s after the step the flood's backlog is gone
					// at every load here: every 100 ms must admit a fair
					// part of what the plant allows.
					if at := p.atTarget(w.offered); w.start >= 5*time.Second && w.admitted < 0.5*at {
						t.Errorf("window %v–%v: admitted %.0f/s, want ≥ half of the %.0f/s the plant allows at target", w.start, w.end, w.admitted, at)
					}
				}
				t.Logf("admitted in the 4 s from the step: one tenant %.0f, no tenant %.0f", a1/10, a0/10)
				if a1 < 0.9*a0 {
					t.Errorf("one tenant admitted %.0f requests in the 4 s from the step, no tenant %.0f: want ≥ 90%%", a1/10, a0/10)
				}
			})
		}
	}
}

// TestStallInFlood: a saturated process sometimes runs nothing for a
// period or two (its accept loop and timers starved), and the next Step
// sees no arrivals at all. That gap must not pull the admitted-rate target
// to zero, from which it climbs back only over seconds.
func TestStallInFlood(t *testing.T) {
	const c0 = 1000.0
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			p := newPlant(c0, seed)
			s := oneSource(p, seed, context.Background(), steps(
				[]time.Duration{0, 3 * time.Second, 7 * time.Second, 7100 * time.Millisecond},
				[]float64{0.5 * c0, 5 * c0, 0, 5 * c0}))
			s.run(7100*time.Millisecond, time.Second)
			ws := s.run(time.Second, 250*time.Millisecond)
			for _, w := range ws {
				// Measured: 0.64–0.67 in the worst window (the overshoot
				// after the gap is corrected), 0 for the whole second when
				// the gap pulled the target to zero.
				if at := p.atTarget(w.offered); w.admitted < 0.5*at {
					t.Errorf("window %v–%v after a 100 ms gap in arrivals: admitted %.0f/s, want ≥ half of the %.0f/s the plant allows at target", w.start, w.end, w.admitted, at)
				}
			}
		})
	}
}

// TestSpikeEnds: the demo's schedule, 0.7C → 3C → 0.7C, every client
// behind one address, on a small server (a few requests a period, so the
// end of the spike is within the noise margin of the arrival-rate
// smoothing). When the spike ends the controller must stop shedding: the
// signal drops at once, but the smoothed arrival rate read as if the spike
// went on for a second, and the plan went on shedding most of the load
// that followed. The small plant's signal is noisy enough at 0.7C to
// trip shedding now and then; the test bounds the rejections of the 2 s
// after the spike by 10% of the requests, or twice those of the 2 s before
// it.
func TestSpikeEnds(t *testing.T) {
	const c0 = 200.0
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			p := newPlant(c0, seed)
			s := oneSource(p, seed, oneTenant, steps(
				[]time.Duration{0, 3 * time.Second, 8 * time.Second},
				[]float64{0.7 * c0, 3 * c0, 0.7 * c0}))
			var before, after int
			s.onRej = func(at time.Duration, _ error) {
				switch {
				case at >= time.Second && at < 3*time.Second:
					before++
				case at >= 8*time.Second && at < 10*time.Second:
					after++
				}
			}
			s.run(12*time.Second, time.Second)
			t.Logf("rejections at 0.7C: %d in the 2 s before the spike, %d in the 2 s after it (of ~%d requests)", before, after, int(2*0.7*c0))
			// Measured: 8–19 after (the smoothed rate kept high: 75–133).
			if limit := max(2*before, int(0.1*2*0.7*c0)); after > limit {
				t.Errorf("%d rejections in the 2 s after the spike, %d in the 2 s before it: want ≤ %d (10%% of the requests, or twice the noise before)", after, before, limit)
			}
		})
	}
}

// TestFloodSeenInArrivals: with a signal three periods late, a 5× flood
// is admitted at full rate until the signal shows it, and on a real
// one-core server that work stalls the process while the kernel's queues
// fill with requests that expire before they are read. The arrivals show
// the flood at once: shedding starts one period after the jump
// (degradation first), not when the signal catches up.
func TestFloodSeenInArrivals(t *testing.T) {
	const c0 = 1000.0
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			p := newPlant(c0, seed)
			p.lag = 3
			s := oneSource(p, seed, context.Background(), steps([]time.Duration{0, 3 * time.Second}, []float64{0.5 * c0, 5 * c0}))
			s.run(3*time.Second, time.Second)
			ws := s.run(200*time.Millisecond, 200*time.Millisecond)
			// At most about two periods at the flood's rate (the jump is
			// counted at the end of the first), then the capacity.
			limit := 2*0.05*5*c0 + 0.1*c0
			t.Logf("admitted in the 200 ms after the step: %.0f (the flood offered %.0f)", ws[0].admitted*0.2, ws[0].offered*0.2)
			if got := ws[0].admitted * 0.2; got > limit {
				t.Errorf("admitted %.0f requests in the 200 ms after a 5× step, want ≤ %.0f", got, limit)
			}
		})
	}
}

// TestOneTenantAdmitsTheAim: with every request from one tenant and most
// of them shed, the plan's fractions apply to the tenant's sampled rate.
// Used as it is, its sampling error does not cancel: an overestimate is
// clipped to the arrival rate, an underestimate leaves a share to "other
// tenants" that nobody uses. Scaled by its share of all samples it is
// exact, and admissions follow the aim.
func TestOneTenantAdmitsTheAim(t *testing.T) {
	const c0 = 1000.0
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			p := newPlant(c0, seed)
			s := oneSource(p, seed, oneTenant, steps([]time.Duration{0, 2 * time.Second}, []float64{0.5 * c0, 8 * c0}))
			var aimed, steps float64
			s.hook = func(at time.Duration, _ time.Time) {
				if at >= 6*time.Second {
					aimed += s.ctl.Snapshot().CapacityRPS
					steps++
				}
			}
			ws := s.run(10*time.Second, time.Second)
			var adm float64
			for _, w := range from(ws, 6*time.Second) {
				adm += w.admitted / 4
			}
			aim := aimed / steps
			t.Logf("steady state: admitted %.0f/s, aim %.0f/s (%.3f)", adm, aim, adm/aim)
			if adm < 0.99*aim || adm > 1.01*aim {
				t.Errorf("admitted %.0f/s against an aim of %.0f/s (%.3f), want within 1%% (measured: 0.998–1.002; 0.976–0.995 unscaled)", adm, aim, adm/aim)
			}
		})
	}
}

// TestStallDipInFlood: in a 5× flood from one tenant (every client behind
// one address), the server falls 200 ms behind, and then the arrivals the
// controller counts drop to a third for 100 ms and come back. On a
// one-core server with 20 ms requests this is what a stall looks like: the
// connection goroutines run late, so fewer requests are read, while the
// signal reads overloaded. Taking that drop at once as the clients going
// away raised the admitted fraction threefold, and the next period
// admitted two to three times what the server could do: on the real
// server, a longer stall.
func TestStallDipInFlood(t *testing.T) {
	const c0 = 1000.0
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			p := newPlant(c0, seed)
			s := oneSource(p, seed, oneTenant, steps(
				[]time.Duration{0, 3 * time.Second, 7 * time.Second, 7100 * time.Millisecond},
				[]float64{0.5 * c0, 5 * c0, 5 * c0 / 3, 5 * c0}))
			s.run(6950*time.Millisecond, time.Second)
			p.backlog += 0.2 * p.capacityWork() // 200 ms behind, then fewer requests read
			s.run(150*time.Millisecond, 150*time.Millisecond)
			ws := s.run(300*time.Millisecond, 50*time.Millisecond)
			for _, w := range ws {
				// Measured: ≤ 0.94 of the plant's at-target rate (less
				// while the backlog drains); 1.8–2.5 in the first 50 ms
				// when the drop was taken at once.
				if at := p.atTarget(w.offered); w.admitted > 1.5*at {
					t.Errorf("window %v–%v after a stall: admitted %.0f/s, want ≤ 1.5 × the %.0f/s the plant allows at target", w.start, w.end, w.admitted, at)
				}
			}
		})
	}
}
