package pressure_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/levee-dev/levee/pressure"
)

// The CPU signal on virtual time with fake readers: a GOMAXPROCS=1 server
// on a 2-core host (the hybrid cgroup layout of levee's build machine) whose
// only P is saturated reads 1.0 — the allowed cores, not the host's, are
// the denominator.
func ExampleNewCPU() {
	var used time.Duration // this process's CPU time, advanced by hand
	cpu, err := pressure.NewCPU(
		pressure.WithCgroupFS(os.DirFS("../internal/cgroup/testdata/hybrid")),
		pressure.WithProcessCPU(func() (time.Duration, error) { return used, nil }),
		pressure.WithMaxProcs(func() int { return 1 }),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 10 {
		cpu.SampleAt(now)
		now = now.Add(100 * time.Millisecond)
		used += 100 * time.Millisecond // one core busy
	}
	r := cpu.Reading()
	fmt.Printf("%s = %.2f of %v core (%s), target %.1f\n", cpu.Name(), cpu.Value(), r.Cores, r.Bound, cpu.Target())
	// Output:
	// cpu = 1.00 of 1 core (GOMAXPROCS), target 0.8
}

// The handler reports how long each request waited before it started; the
// signal is the minimum of each 100 ms interval.
func ExampleQueueDelay() {
	q := pressure.NewQueueDelay()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.SampleAt(now)
	for _, d := range []time.Duration{12 * time.Millisecond, 9 * time.Millisecond, 15 * time.Millisecond} {
		q.Observe(d) // in the handler: q.Observe(start.Sub(arrival))
	}
	q.SampleAt(now.Add(100 * time.Millisecond))
	fmt.Printf("queue_delay %.3fs, overloaded: %v\n", q.Value(), q.Value() > q.Target())
	// Output:
	// queue_delay 0.009s, overloaded: true
}

// The recommended set, sampled in the background until ctx is done.
func ExampleDefault() {
	set, err := pressure.Default()
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { set.Run(ctx); close(done) }()
	for _, s := range set.Signals() {
		fmt.Println(s.Name(), s.Target())
	}
	cancel()
	<-done
	// Output:
	// cpu 0.95
	// sched_latency 0.05
	// queue_delay 0.005
}
