package throttle

import (
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

var sinkTime time.Time

// BenchmarkTimeNow is the yardstick for BenchmarkThrottle in the same run.
func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		sinkTime = time.Now()
	}
}

func BenchmarkThrottle(b *testing.B) {
	b.Run("allow", func(b *testing.B) {
		t := New()
		b.ReportAllocs()
		for b.Loop() {
			if t.Allow(levee.Critical) == nil {
				t.Done(levee.Critical, true)
			}
		}
	})
	b.Run("allow-parallel", func(b *testing.B) {
		t := New()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if t.Allow(levee.Critical) == nil {
					t.Done(levee.Critical, true)
				}
			}
		})
	})
	b.Run("allow-per-timenow", func(b *testing.B) {
		// The same-run ratio, robust to a busy machine: chunks of Allow
		// (with Accept) and of time.Now interleaved.
		t := New()
		var inAllow, inNow time.Duration
		n := 0
		for b.Loop() {
			s := time.Now()
			for range 1000 {
				if t.Allow(levee.Critical) == nil {
					t.Done(levee.Critical, true)
				}
			}
			m := time.Now()
			for range 1000 {
				sinkTime = time.Now()
			}
			inAllow += m.Sub(s)
			inNow += time.Since(m)
			n += 1000
		}
		b.ReportMetric(float64(inAllow)/float64(n), "allow-ns")
		b.ReportMetric(float64(inNow)/float64(n), "timenow-ns")
		b.ReportMetric(float64(inAllow)/float64(inNow), "allow/timenow")
	})
	b.Run("allow-at", func(b *testing.B) {
		t := New()
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			t.AllowAt(now, levee.Critical)
		}
	})
	b.Run("allow-throttling", func(b *testing.B) {
		// Steady overload: P ≈ 0.8, most calls take the reject path.
		t := New()
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Millisecond)
			if t.AllowAt(now, levee.Critical) == nil {
				n++
				t.DoneAt(now, levee.Critical, n%2 == 0)
			}
		}
	})
}
