package admit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// backlogSignal is a delay signal of the plant, as scheduler latency reads
// when a process's own admitted work piles up: the longest wait of the
// work that ran recently — the plant's backlog in seconds, the largest
// over the last 500 ms (a goroutine reports its wait when it finally
// runs) — target 50 ms. Sample it every period.
type backlogSignal struct {
	p    *plant
	hist [10]float64
	i    int
	v    float64
}

func (b *backlogSignal) sample() {
	b.hist[b.i%len(b.hist)] = b.p.backlog / b.p.capacityWork()
	b.i++
	b.v = 0
	for _, x := range b.hist {
		b.v = max(b.v, x)
	}
}
func (b *backlogSignal) Name() string    { return "sched_latency" }
func (b *backlogSignal) Value() float64  { return b.v }
func (b *backlogSignal) Target() float64 { return 0.05 }

// utilPlant is the plant's CPU reading as a utilisation (it saturates at
// 1, as pressure's CPU does).
type utilPlant struct{ *plant }

func (u utilPlant) Saturation() float64 { return 1 }

// TestFloodOnsetKeepsCapacity: a 5× flood starts; the arrivals show it at
// once, and a delay signal that reads the process's own backlog spikes far
// above its target a period later. The backlog is the controller's own
// doing, not lost capacity: the capacity estimate must not collapse with
// it (measured on gRPC: 0.2–0.4 of capacity for 1.5–2.5 s), and the
// admitted work before the first shedding Step is bounded.
func TestFloodOnsetKeepsCapacity(t *testing.T) {
	const c0 = 1000.0
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			p := newPlant(c0, seed)
			bl := &backlogSignal{p: p}
			ctl := admit.New(admit.WithSignals(utilPlant{p}, bl), admit.WithSeed(seed))
			src := &source{ctx: context.Background(), rate: steps([]time.Duration{0, 3 * time.Second}, []float64{0.5 * c0, 5 * c0})}
			s := &sim{ctl: ctl, p: p, srcs: []*source{src}, t0: t0}
			minCap := 1e18
			s.hook = func(at time.Duration, _ time.Time) {
				bl.sample()
				if at > 3*time.Second && at <= 6*time.Second {
					minCap = min(minCap, ctl.Snapshot().CapacityRPS)
				}
			}
			s.run(3*time.Second, time.Second)
			first := s.run(100*time.Millisecond, 100*time.Millisecond)
			ws := s.run(3*time.Second, 500*time.Millisecond)
			at := p.atTarget(5 * c0)
			t.Logf("admitted in the first 100 ms: %.0f; lowest capacity estimate in the 3 s after the onset %.0f/s (at target %.0f/s); 500 ms windows completed/s: %v",
				first[0].admitted*0.1, minCap, at, completed(ws))
			if minCap < 0.85*at {
				t.Errorf("capacity estimate fell to %.0f/s after the onset, want ≥ 0.85 × %.0f", minCap, at)
			}
			for _, w := range ws[1:] {
				if w.completed < 0.9*at {
					t.Errorf("window %v–%v: completed %.0f/s, want ≥ 0.9 × %.0f", w.start, w.end, w.completed, at)
				}
			}
			// Before the first shedding Step, at most about two periods'
			// worth at twice the capacity (the surge bound), not the
			// flood's 5×.
			if got, limit := first[0].admitted*0.1, 2*0.1*2*c0+0.05*c0; got > limit {
				t.Errorf("admitted %.0f in the first 100 ms of a 5× flood, want ≤ %.0f", got, limit)
			}
		})
	}
}

func completed(ws []window) []int {
	var out []int
	for _, w := range ws {
		out = append(out, int(w.completed))
	}
	return out
}
