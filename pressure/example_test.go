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
	fmt.Printf("%s = %.2f of %v core (%s), target %.2f\n", cpu.Name(), cpu.Value(), r.Cores, r.Bound, cpu.Target())
	// Output:
	// cpu = 1.00 of 1 core (GOMAXPROCS), target 0.95
}

// The handler reports how long each request waited before it started; the
// signal is the minimum of each 100 ms interval. Its target is learned:
// here one core half busy with 500 requests a second is 1 ms of CPU per
// request, and a standing queue of 100 such requests is the target.
func ExampleQueueDelay() {
	q := pressure.NewQueueDelay(pressure.WithQueueCPU(func() float64 { return 0.5 }))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	q.SampleAt(now)
	for _, wait := range []time.Duration{30, 150, 120} {
		for range 50 {
			q.Observe(wait * time.Millisecond) // in the handler: q.Observe(start.Sub(arrival))
		}
		now = now.Add(100 * time.Millisecond)
		q.SampleAt(now)
		fmt.Printf("queue_delay %.3fs, target %.3fs, overloaded: %v\n", q.Value(), q.Target(), q.Value() > q.Target())
	}
	// Output:
	// queue_delay 0.030s, target 0.100s, overloaded: false
	// queue_delay 0.150s, target 0.100s, overloaded: true
	// queue_delay 0.120s, target 0.100s, overloaded: true
}

// The concurrency signal on virtual time: requests wait on a pool of 8
// connections to a dependency. While it answers in 5 ms nothing waits; when
// it slows to 50 ms the requests pile up in the handler and the signal
// reads overloaded while the CPU is idle.
func ExampleConcurrency() {
	c := pressure.NewConcurrency()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type req struct {
		s   pressure.Start
		end time.Time
	}
	var live []req
	free := 8 // connections
	var waiting []pressure.Start
	step := func(dep time.Duration) {
		for range 50 { // 1 ms steps
			now = now.Add(time.Millisecond)
			kept := live[:0]
			for _, r := range live {
				if now.Before(r.end) {
					kept = append(kept, r)
					continue
				}
				c.DoneAt(r.s, now, 0)
				free++
			}
			live = kept
			waiting = append(waiting, c.StartAt(now, time.Second)) // 1000 requests a second
			for free > 0 && len(waiting) > 0 {
				live = append(live, req{waiting[0], now.Add(dep)})
				waiting, free = waiting[1:], free-1
			}
		}
		c.SampleAt(now)
	}
	for range 20 {
		step(5 * time.Millisecond)
	}
	r := c.Reading()
	fmt.Printf("5 ms: service time %v, overloaded: %v\n", r.ServiceTime.Round(time.Millisecond), c.Value() > c.Target())
	for range 4 {
		step(50 * time.Millisecond)
	}
	fmt.Printf("50 ms: %d in the handler, overloaded: %v\n", c.InFlight(), c.Value() > c.Target())
	// Output:
	// 5 ms: service time 5ms, overloaded: false
	// 50 ms: 176 in the handler, overloaded: true
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
	// queue_delay 0.1
	// concurrency 1
	// memory 0.8
	// gc_cpu 0.3
	// open_files 0.8
}

// A simulated instance on virtual time gets Default's signals, wired the
// same way, with the instance's own CPU reader: a simulator's levee is
// Default's levee.
func ExampleSimulated() {
	var busy time.Duration // the instance's cumulative busy core-time
	set, err := pressure.Simulated(func() (time.Duration, error) { return busy, nil }, func() int { return 2 })
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 20 {
		set.SampleAt(now)
		now = now.Add(50 * time.Millisecond)
		busy += 50 * time.Millisecond // one of two cores busy
	}
	for _, s := range set.Signals() {
		fmt.Printf("%s %.2f (target %.2f)\n", s.Name(), s.Value(), s.Target())
	}
	// Output:
	// cpu 0.50 (target 0.95)
	// queue_delay 0.00 (target 0.10)
	// concurrency NaN (target 1.00)
}

// The memory signal against GOMEMLIMIT, with the runtime's figures faked:
// 150 MiB live and 10 MiB of stacks and metadata under a 200 MiB limit.
func ExampleNewMemory() {
	m := pressure.NewMemory(pressure.WithMemoryCgroupFS(nil), pressure.WithMemoryStats(func() pressure.MemoryStats {
		return pressure.MemoryStats{Live: 150 << 20, NonHeap: 10 << 20, Goal: 300 << 20, GoLimit: 200 << 20}
	}))
	m.SampleAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	r := m.Reading()
	fmt.Printf("%s %.2f of %d MiB (target %.2f)\n", m.Name(), m.Value(), r.Limit>>20, m.Target())
	// Output:
	// memory 0.80 of 200 MiB (target 0.80)
}

// Open descriptors against RLIMIT_NOFILE, with the count faked; a
// goroutine ceiling is configured the same way (NewGoroutines).
func ExampleNewOpenFiles() {
	files := pressure.NewOpenFiles(pressure.WithCountSource(func() (n, limit int64, err error) { return 900, 1024, nil }))
	files.SampleAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	fmt.Printf("%s %.2f, overloaded: %v\n", files.Name(), files.Value(), files.Value() > files.Target())
	// Output:
	// open_files 0.88, overloaded: true
}
