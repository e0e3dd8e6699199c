package pressure

import (
	"time"

	"context"
	"sync"

	"github.com/levee-dev/levee"
)

// Set is the recommended set of signals for a server: CPU against the cores
// it may use, Go scheduler latency and queueing delay, each with its
// defaults. The handler (leveehttp does it) calls Queue.Observe with each
// request's wait before its handler started. Members may be built by hand
// with other options, and any may be nil:
//
//	cpu, err := pressure.NewCPU(pressure.WithCPUTarget(0.9), pressure.WithRunQueueWait(true))
//	set := &pressure.Set{CPU: cpu, Sched: pressure.NewSchedLatency(), Queue: pressure.NewQueueDelay()}
type Set struct {
	CPU   *CPU
	Sched *SchedLatency
	Queue *QueueDelay
}

// setPeriod is the sampling period and EWMA time constant of the CPU and
// scheduler-latency signals in Default: the admission controller's period
// (admit.DefaultPeriod). Its control law expects a reading to reflect
// admissions about two periods back; the standalone defaults (100 ms
// samples, 200 ms EWMA) lag about six of its periods, enough for a limit
// cycle on a real server.
const setPeriod = 50 * time.Millisecond

// defaultCPUTarget is the CPU target of Default. A one-core Go HTTP server
// spends more CPU per request at moderate load than near saturation (each
// request wakes an idle process; near saturation the poller batches):
// measured on the loopback harness with 1 ms requests, 0.62 of the core at
// 0.5× of its peak throughput and 0.85–0.9 at 0.7×. A target of 0.8 shed at
// 0.7× of what the core can serve. The queue that forms near 1.0 is what
// the scheduler-latency signal sees (p99 ≈ 1.5 ms at 0.7×, above 50 ms
// within 100 ms of a flood), so CPU need only say "nearly full".
const defaultCPUTarget = 0.95

// Default builds the recommended Set for admit.Controller: CPU (target 0.95
// of the allowed cores, see defaultCPUTarget) and scheduler latency (p99,
// target 50 ms), both sampled every 50 ms with a 50 ms EWMA, and queueing
// delay (minimum over 100 ms intervals, target 5 ms). Start sampling with
// go set.Run(ctx) and pass set.Signals() to the admission controller:
//
//	set, err := pressure.Default()
//	if err != nil { ... }
//	go set.Run(ctx)
//	ctl := admit.New(admit.WithSignals(set.Signals()...))
func Default() (*Set, error) {
	c, err := NewCPU(DefaultCPUOptions()...)
	if err != nil {
		return nil, err
	}
	sched := NewSchedLatency(WithSchedPeriod(setPeriod), WithSchedSmoothing(setPeriod))
	return &Set{CPU: c, Sched: sched, Queue: NewQueueDelay()}, nil
}

// DefaultCPUOptions returns the options of Default's CPU signal (target
// 0.95, sampled every 50 ms with a 50 ms EWMA), for a CPU signal built
// with other readers, such as the simulator's, that should behave as a
// real server's: append the readers after them.
func DefaultCPUOptions() []CPUOption {
	return []CPUOption{WithCPUTarget(defaultCPUTarget), WithCPUPeriod(setPeriod), WithCPUSmoothing(setPeriod)}
}

// Signals returns the set's signals, in the order CPU, scheduler latency,
// queueing delay; nil members are left out.
func (s *Set) Signals() []levee.Signal {
	var out []levee.Signal
	if s.CPU != nil {
		out = append(out, s.CPU)
	}
	if s.Sched != nil {
		out = append(out, s.Sched)
	}
	if s.Queue != nil {
		out = append(out, s.Queue)
	}
	return out
}

// Run runs every member's sampler until ctx is done and returns when all
// of them have stopped.
func (s *Set) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if s.CPU != nil {
		wg.Go(func() { s.CPU.Run(ctx) })
	}
	if s.Sched != nil {
		wg.Go(func() { s.Sched.Run(ctx) })
	}
	if s.Queue != nil {
		wg.Go(func() { s.Queue.Run(ctx) })
	}
	wg.Wait()
}
