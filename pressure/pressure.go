// Package pressure provides resource signals (work in progress).
package pressure

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/limit"
)

type value struct{ bits atomic.Uint64 }

func (v *value) load() float64 {
	b := v.bits.Load()
	if b == 0 {
		return math.NaN()
	}
	return math.Float64frombits(b)
}

func run(ctx context.Context, period time.Duration, f func(time.Time)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			f(now)
		}
	}
}

// CPU is this process's CPU use against the cores it may use.
type CPU struct{ v value }

// CPUOption configures a CPU signal.
type CPUOption func(*CPU)

// NewCPU returns a CPU signal.
func NewCPU(opts ...CPUOption) (*CPU, error) { return &CPU{}, nil }

// Name returns "cpu".
func (c *CPU) Name() string { return "cpu" }

// Value returns the latest reading.
func (c *CPU) Value() float64 { return c.v.load() }

// Target returns 0.8.
func (c *CPU) Target() float64 { return 0.8 }

// SampleAt samples at now.
func (c *CPU) SampleAt(now time.Time) {}

// Run samples until ctx is done.
func (c *CPU) Run(ctx context.Context) { run(ctx, 100*time.Millisecond, c.SampleAt) }

// SchedLatency is the Go scheduler latency.
type SchedLatency struct{ v value }

// SchedOption configures a SchedLatency.
type SchedOption func(*SchedLatency)

// NewSchedLatency returns a SchedLatency signal.
func NewSchedLatency(opts ...SchedOption) *SchedLatency { return &SchedLatency{} }

// Name returns "sched_latency".
func (s *SchedLatency) Name() string { return "sched_latency" }

// Value returns the latest reading in seconds.
func (s *SchedLatency) Value() float64 { return s.v.load() }

// Target returns the target in seconds.
func (s *SchedLatency) Target() float64 { return 0.05 }

// SampleAt samples at now.
func (s *SchedLatency) SampleAt(now time.Time) {}

// Run samples until ctx is done.
func (s *SchedLatency) Run(ctx context.Context) { run(ctx, 100*time.Millisecond, s.SampleAt) }

// QueueDelay is the delay between a request's arrival and its handler.
type QueueDelay struct{ v value }

// QueueOption configures a QueueDelay.
type QueueOption func(*QueueDelay)

// NewQueueDelay returns a QueueDelay signal.
func NewQueueDelay(opts ...QueueOption) *QueueDelay { return &QueueDelay{} }

// Name returns "queue_delay".
func (q *QueueDelay) Name() string { return "queue_delay" }

// Value returns the latest reading in seconds.
func (q *QueueDelay) Value() float64 { return q.v.load() }

// Target returns the target in seconds.
func (q *QueueDelay) Target() float64 { return 0.005 }

// Observe records one request's queueing delay.
func (q *QueueDelay) Observe(d time.Duration) {}

// SampleAt samples at now.
func (q *QueueDelay) SampleAt(now time.Time) {}

// Run samples until ctx is done.
func (q *QueueDelay) Run(ctx context.Context) { run(ctx, 100*time.Millisecond, q.SampleAt) }

// Concurrency is in-flight requests against an adaptive limit.
type Concurrency struct {
	v value
	l limit.Limiter
}

// ConcurrencyOption configures a Concurrency.
type ConcurrencyOption func(*Concurrency)

// NewConcurrency returns a Concurrency signal.
func NewConcurrency(l limit.Limiter, opts ...ConcurrencyOption) *Concurrency {
	return &Concurrency{l: l}
}

// Name returns "concurrency".
func (c *Concurrency) Name() string { return "concurrency" }

// Value returns inflight/limit.
func (c *Concurrency) Value() float64 { return c.v.load() }

// Target returns 1.
func (c *Concurrency) Target() float64 { return 1 }

// Acquire marks a request in flight.
func (c *Concurrency) Acquire() {}

// Release marks a request done after rtt.
func (c *Concurrency) Release(rtt time.Duration) {}

// SampleAt samples at now.
func (c *Concurrency) SampleAt(now time.Time) {}

// Run samples until ctx is done.
func (c *Concurrency) Run(ctx context.Context) { run(ctx, 100*time.Millisecond, c.SampleAt) }

// Set is the recommended set of signals.
type Set struct {
	CPU   *CPU
	Sched *SchedLatency
	Queue *QueueDelay
}

// Default builds the recommended set.
func Default() (*Set, error) {
	c, err := NewCPU()
	if err != nil {
		return nil, err
	}
	return &Set{CPU: c, Sched: NewSchedLatency(), Queue: NewQueueDelay()}, nil
}

// Signals returns the set's signals.
func (s *Set) Signals() []levee.Signal { return []levee.Signal{s.CPU, s.Sched, s.Queue} }

// Run runs every signal of the set until ctx is done.
func (s *Set) Run(ctx context.Context) {
	done := make(chan struct{}, 3)
	for _, f := range []func(context.Context){s.CPU.Run, s.Sched.Run, s.Queue.Run} {
		go func() { f(ctx); done <- struct{}{} }()
	}
	for range 3 {
		<-done
	}
}

var _ levee.Signal = (*Concurrency)(nil)
