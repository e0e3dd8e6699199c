package pressure

import (
	"context"
	"fmt"
	"math"
	"runtime/metrics"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
)

// TestRunStops runs every sampler on synctest's virtual clock, checks that
// it sampled at its period, cancels the context and checks that Run
// returned. synctest.Test also fails if any goroutine of the bubble is left
// behind (a ticker or a sampler that did not stop).
func TestRunStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		f := &fakeCPU{busy: 1}
		cpu, err := NewCPU(WithCgroupFS(nil), WithMaxProcs(func() int { return 2 }),
			WithProcessCPU(func() (time.Duration, error) {
				return time.Duration(f.busy * float64(time.Since(start))), nil
			}))
		if err != nil {
			t.Fatal(err)
		}
		h := newFakeHist()
		sched := NewSchedLatency(WithSchedSource(func() *metrics.Float64Histogram { h.add(2, 10); return h.read() }))
		queue := NewQueueDelay()
		conc := NewConcurrency()
		set := &Set{CPU: cpu, Sched: sched, Queue: queue}

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan string, 2)
		go func() { set.Run(ctx); done <- "set" }()
		go func() { conc.Run(ctx); done <- "concurrency" }()
		var sts [10]Start
		for range 10 {
			queue.Observe(7 * time.Millisecond)
			for i := range sts {
				sts[i] = conc.StartAt(time.Now(), 0)
			}
			time.Sleep(100 * time.Millisecond)
			for _, st := range sts {
				conc.DoneAt(st, time.Now(), 0)
			}
		}
		synctest.Wait()
		for _, s := range append(set.Signals(), levee.Signal(conc)) {
			if math.IsNaN(s.Value()) {
				t.Errorf("%s: no value after 1 s of Run", s.Name())
			}
		}
		if got := cpu.Value(); math.Abs(got-0.5) > 1e-9 {
			t.Errorf("cpu Value = %v; want 0.5 (one busy core of two)", got)
		}
		if got := cpu.Reading().Time.Sub(start); got != time.Second {
			t.Errorf("last cpu sample at start+%v; want start+1s (period 100ms)", got)
		}
		cancel()
		for range 2 {
			<-done
		}
	})
}

func TestRunCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := NewConcurrency()
	q := NewQueueDelay()
	c.Run(ctx)
	q.Run(ctx)
	if !math.IsNaN(c.Value()) || !math.IsNaN(q.Value()) {
		t.Errorf("Run with a cancelled ctx sampled: %v %v", c.Value(), q.Value())
	}
}

func TestDefault(t *testing.T) {
	s, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, sig := range s.Signals() {
		names = append(names, sig.Name())
		if !(sig.Target() > 0) {
			t.Errorf("%s: Target %v; want > 0", sig.Name(), sig.Target())
		}
	}
	want := "[cpu sched_latency queue_delay concurrency memory gc_cpu open_files]"
	if got := fmt.Sprint(names); got != want {
		t.Errorf("Default signals = %v; want %v", got, want)
	}
	s, err = Default(WithGoroutineLimit(1000))
	if err != nil || s.Goroutines == nil || s.Goroutines.Reading().Limit != 0 {
		t.Errorf("Default(WithGoroutineLimit(1000)): %v, goroutines %v", err, s.Goroutines)
	}
	if _, err := Default(WithGoroutineLimit(-1)); err == nil || !strings.HasPrefix(err.Error(), "pressure: WithGoroutineLimit(-1)") {
		t.Errorf("Default(WithGoroutineLimit(-1)) error = %v; want one naming the option", err)
	}
	s, err = Default(WithoutSignals("memory", "gc_cpu", "open_files"), WithCPUOptions(WithCPUTarget(0.9)),
		WithQueueOptions(WithQueueTarget(7*time.Millisecond)), WithConcurrencyOptions(WithLatencyRatio(3)))
	if err != nil {
		t.Fatal(err)
	}
	names = names[:0]
	for _, sig := range s.Signals() {
		names = append(names, sig.Name())
	}
	if got := fmt.Sprint(names); got != "[cpu sched_latency queue_delay concurrency]" || s.CPU.Target() != 0.9 ||
		s.Queue.Target() != 0.007 || s.Concurrency.cfg.ratio != 3 || s.Concurrency.cfg.cpu == nil {
		t.Errorf("Default with options: %v, cpu %v, queue %v, ratio %v; want the options applied over the wiring",
			got, s.CPU.Target(), s.Queue.Target(), s.Concurrency.cfg.ratio)
	}
	if _, err := Default(WithoutSignals("cpu_typo")); err == nil || !strings.Contains(err.Error(), "WithoutSignals") {
		t.Errorf("Default(WithoutSignals(\"cpu_typo\")) error = %v; want one naming the option", err)
	}
	if s, err := Default(WithGoroutineLimit(0)); err != nil || s.Goroutines != nil {
		t.Errorf("Default(WithGoroutineLimit(0)) = %v, %v; want the default, no goroutines signal", s, err)
	}
	if got := len((&Set{Queue: NewQueueDelay()}).Signals()); got != 1 {
		t.Errorf("partial Set: %d signals; want 1", got)
	}
}

// TestSampleTooSoonSkipped: a sampler starved by a saturated scheduler
// finds two ticks waiting; the second, less than half a period after the
// first, is skipped by every signal instead of measuring microseconds.
func TestSampleTooSoonSkipped(t *testing.T) {
	f := &fakeCPU{busy: 1}
	cpu := newTestCPU(t, nil, 1, f, WithCPUPeriod(100*time.Millisecond))
	h := newFakeHist()
	sched := NewSchedLatency(WithSchedSource(h.read), WithSchedPeriod(100*time.Millisecond))
	queue := NewQueueDelay()
	conc := NewConcurrency(WithConcurrencyPeriod(100 * time.Millisecond))
	times := []time.Duration{0, 100 * time.Millisecond, 140 * time.Millisecond, 149 * time.Millisecond}
	for _, d := range times {
		f.used = d // one busy core
		cpu.SampleAt(t0.Add(d))
		sched.SampleAt(t0.Add(d))
		queue.SampleAt(t0.Add(d))
		conc.SampleAt(t0.Add(d))
	}
	want := t0.Add(100 * time.Millisecond)
	for name, got := range map[string]time.Time{
		"cpu": cpu.Reading().Time, "sched_latency": sched.Reading().Time,
		"queue_delay": queue.Reading().Time, "concurrency": conc.Reading().Time,
	} {
		if !got.Equal(want) {
			t.Errorf("%s: last sample at %v; want %v (samples 40 and 49 ms later skipped)", name, got.Sub(t0), want.Sub(t0))
		}
	}
	f.used = 150 * time.Millisecond
	cpu.SampleAt(t0.Add(150 * time.Millisecond))
	if r := cpu.Reading(); !r.Time.Equal(t0.Add(150*time.Millisecond)) || r.Value != 1 {
		t.Errorf("sample half a period later: %v, value %v; want taken, 1", r.Time.Sub(t0), r.Value)
	}
}
