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
// readers of this machine (getrusage, cgroup files, runtime/metrics,
// /proc/self/fd), and of the learning signals' sample step.
func BenchmarkSample(b *testing.B) {
	unreadSched := NewSchedLatency() // Unread: read by the admission controller each Step
	cpu, _ := NewCPU()
	conc := NewConcurrency()
	queue := NewQueueDelay(WithQueueCPU(func() float64 { return 0.5 }))
	for _, s := range []struct {
		name   string
		sample func(time.Time)
		step   time.Duration // between samples: the period, or past the cgroup re-read
		before func()        // request-path work between samples
	}{
		{"cpu", cpu.SampleAt, setPeriod, nil},
		{"cpu+cgroup", cpu.SampleAt, time.Second, nil},
		{"sched", NewSchedLatency().SampleAt, setPeriod, nil},
		{"sched_unread", func(time.Time) { _ = unreadSched.Unread() }, setPeriod, nil},
		{"memory", NewMemory().SampleAt, 100 * time.Millisecond, nil},
		{"memory+cgroup", NewMemory().SampleAt, time.Second, nil},
		{"gc_cpu", NewGCCPU().SampleAt, 100 * time.Millisecond, nil},
		{"goroutines", NewGoroutines(1000).SampleAt, 100 * time.Millisecond, nil},
		{"open_files", NewOpenFiles().SampleAt, time.Second, nil},
		{"queue_delay", queue.SampleAt, 100 * time.Millisecond, func() { queue.Observe(time.Millisecond) }},
		{"concurrency", conc.SampleAt, setPeriod, func() {
			now := time.Now()
			conc.DoneAt(conc.StartAt(now, time.Second), now.Add(time.Millisecond), 0)
		}},
	} {
		b.Run(s.name, func(b *testing.B) {
			now := time.Now()
			b.ReportAllocs()
			for range b.N {
				if s.before != nil {
					s.before()
				}
				now = now.Add(s.step)
				s.sample(now)
			}
		})
	}
}
