package overload

import (
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// BenchmarkEnterExit measures the request path: Enter and Exit around a
// request, while no action concerns requests (normal) and while the
// InFlight cap and LargeBodies apply (capped: a time reading and the
// compares more).
func BenchmarkEnterExit(b *testing.B) {
	for _, bc := range []struct {
		name string
		v    float64
	}{{"normal", 0.1}, {"capped", 0.93}} {
		b.Run(bc.name, func(b *testing.B) {
			mem := newScripted("memory", [3]float64{0.92, 0.95, 0.98}, 0.9)
			m := New(WithResources(mem.res), WithPeriod(10*time.Second))
			mem.r = Reading{Value: bc.v}
			m.Step(time.Now())
			if (m.gate.Load() == nil) != (bc.name == "normal") {
				b.Fatalf("%s: gate %v", bc.name, m.gate.Load())
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if m.Enter(levee.Critical, 0) == Pass {
						m.Exit()
					}
				}
			})
		})
	}
}

// BenchmarkStep measures one step with the four resources of
// pressure.Default's set (their readings scripted).
func BenchmarkStep(b *testing.B) {
	var rs []Resource
	for _, n := range []string{"memory", "gc_cpu", "goroutines", "open_files"} {
		s := newScripted(n, [3]float64{0.92, 0.95, 0.98}, 0.9)
		s.r = Reading{Value: 0.5}
		rs = append(rs, s.res)
	}
	m := New(WithResources(rs...))
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		m.Step(now.Add(time.Duration(i) * 100 * time.Millisecond))
	}
}
