package admit_test

import (
	"context"
	"math"
	"testing"

	"github.com/levee-dev/levee/admit"
)

// poolSignal stands in for pressure.Concurrency: a wait signal (no
// Saturation method) that measures its bottleneck's throughput.
type poolSignal struct {
	fixedSignal
	capacity float64
}

func (p *poolSignal) Name() string      { return "concurrency" }
func (p *poolSignal) Capacity() float64 { return p.capacity }

// TestBottleneckCapacityAtEntry: when a signal that watches a bottleneck
// (a dependency's pool) binds, the overload episode starts from the
// bottleneck's throughput — the signal's own measure, or until it has
// one, the rate the handlers completed requests at — not from the
// capacity the CPU-bound periods before taught (about 1000/s here).
func TestBottleneckCapacityAtEntry(t *testing.T) {
	for _, tc := range []struct {
		name     string
		measured float64 // the signal's Capacity
		want     float64
	}{
		{"the signal's measure", 200, 200},
		{"not measured yet: the completions", 0, 160},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cpu := newFixedSignal(0.2, 0.8)
			pool := &poolSignal{fixedSignal: *newFixedSignal(0.3, 1), capacity: tc.measured}
			ctl := admit.New(admit.WithSignals(cpuSignal{cpu}, pool))
			now := t0
			var pending []admit.Ticket
			period := func(done int) {
				for range 50 { // 1000/s
					tk, err := ctl.AdmitAt(context.Background(), now)
					if err == nil {
						pending = append(pending, tk)
					}
				}
				for i := 0; i < done && i < len(pending); i++ {
					pending[i].DoneAt(now, nil)
				}
				pending = pending[min(done, len(pending)):]
				now = now.Add(admit.DefaultPeriod)
				ctl.Step(now)
			}
			for range 60 {
				period(50) // all done: the dependency is fast
			}
			cpu.set(0.04)
			pool.set(6) // the dependency slowed: 8 done a period (160/s)
			var got float64
			for range 3 {
				period(8)
				if s := ctl.Snapshot(); s.Overloaded {
					got = s.CapacityRPS // the target while shedding
					break
				}
			}
			t.Logf("capacity at entry %.0f/s", got)
			if math.Abs(got-tc.want) > 0.1*tc.want {
				t.Errorf("capacity at entry %.0f/s, want %.0f/s ±10%%", got, tc.want)
			}
		})
	}
}

// cpuSignal is a utilisation (a Saturation method, as pressure's CPU).
type cpuSignal struct{ *fixedSignal }

func (cpuSignal) Name() string        { return "cpu" }
func (cpuSignal) Saturation() float64 { return 1 }
