package pressure

import (
	"sync/atomic"
	"testing"
	"time"
)

func BenchmarkObserve(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		q := NewQueueDelay()
		b.ReportAllocs()
		for i := range b.N {
			q.Observe(time.Duration(i & 1023))
		}
	})
	b.Run("parallel", func(b *testing.B) {
		q := NewQueueDelay()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			d := time.Duration(5000)
			for pb.Next() {
				q.Observe(d)
				d++
			}
		})
	})
	// Worst case: every observation is a new minimum and CASes the shared
	// word.
	b.Run("parallel-new-minimum", func(b *testing.B) {
		q := NewQueueDelay()
		var seq atomic.Int64
		seq.Store(1 << 62)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				q.Observe(time.Duration(seq.Add(-1)))
			}
		})
	})
}

// BenchmarkStartDone is the request path of the concurrency signal:
// StartAt and DoneAt with the caller's clock readings (the adapter has
// them), with and without a budget.
func BenchmarkStartDone(b *testing.B) {
	now := time.Now()
	end := now.Add(time.Millisecond)
	b.Run("serial", func(b *testing.B) {
		c := NewConcurrency()
		b.ReportAllocs()
		for range b.N {
			s := c.StartAt(now, 0)
			c.DoneAt(s, end, 0)
		}
	})
	b.Run("serial-budget", func(b *testing.B) {
		c := NewConcurrency()
		b.ReportAllocs()
		for range b.N {
			s := c.StartAt(now, time.Second)
			c.DoneAt(s, end, 0)
		}
	})
	b.Run("parallel", func(b *testing.B) {
		c := NewConcurrency()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				s := c.StartAt(now, time.Second)
				c.DoneAt(s, end, 0)
			}
		})
	})
}

// BenchmarkValue is what the admission controller pays per signal and
// control period.
func BenchmarkValue(b *testing.B) {
	c, _ := NewCPU()
	b.ReportAllocs()
	var sink float64
	for range b.N {
		sink += c.Value()
	}
	_ = sink
}

// BenchmarkSample is the background cost of one sample with the real
// readers of this machine (getrusage, cgroup files, runtime/metrics).
func BenchmarkSample(b *testing.B) {
	b.Run("cpu", func(b *testing.B) {
		c, _ := NewCPU()
		now := time.Now()
		b.ReportAllocs()
		for range b.N {
			now = now.Add(100 * time.Millisecond)
			c.SampleAt(now)
		}
	})
	b.Run("sched", func(b *testing.B) {
		s := NewSchedLatency()
		now := time.Now()
		b.ReportAllocs()
		for range b.N {
			now = now.Add(100 * time.Millisecond)
			s.SampleAt(now)
		}
	})
}
