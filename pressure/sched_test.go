package pressure

import (
	"fmt"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeHist is a cumulative scheduler latency histogram the test fills.
type fakeHist struct{ h metrics.Float64Histogram }

func newFakeHist() *fakeHist {
	return &fakeHist{h: metrics.Float64Histogram{
		// seconds: [0,1ms) [1ms,2ms) [2ms,10ms) [10ms,100ms) [100ms,+Inf)
		Buckets: []float64{0, 0.001, 0.002, 0.010, 0.100, math.Inf(1)},
		Counts:  make([]uint64, 5),
	}}
}

func (f *fakeHist) add(bucket int, n uint64) { f.h.Counts[bucket] += n }

func (f *fakeHist) read() *metrics.Float64Histogram { return &f.h }

func TestSchedPercentileOfDelta(t *testing.T) {
	f := newFakeHist()
	s := NewSchedLatency(WithSchedSource(f.read), WithSchedSmoothing(0))
	// History before the first sample must not count.
	f.add(4, 1000)
	s.SampleAt(t0)
	if !math.IsNaN(s.Value()) {
		t.Fatalf("after one sample: Value = %v; want NaN", s.Value())
	}
	tests := []struct {
		name   string
		add    [5]uint64
		want   float64
		counts uint64
	}{
		// 99 fast, 1 in [2ms,10ms): rank 99 is the last fast one → 1 ms.
		{"mostly fast", [5]uint64{0, 99, 1, 0, 0}, 0.002, 100},
		// 100 in [10ms,100ms): p99 interpolates to 10 + 90×0.99 ms.
		{"all slow", [5]uint64{0, 0, 0, 100, 0}, 0.0991, 100},
		// Nothing scheduled: 0.
		{"idle", [5]uint64{}, 0, 0},
		// Overflow bucket: its lower bound.
		{"overflow", [5]uint64{0, 0, 0, 0, 10}, 0.1, 10},
	}
	now := t0
	for _, tt := range tests {
		for i, n := range tt.add {
			f.add(i, n)
		}
		now = now.Add(100 * time.Millisecond)
		s.SampleAt(now)
		r := s.Reading()
		if math.Abs(s.Value()-tt.want) > 1e-12 || r.Count != tt.counts {
			t.Errorf("%s: Value = %v (count %d); want %v (count %d)", tt.name, s.Value(), r.Count, tt.want, tt.counts)
		}
	}
	// A counter that went backwards restarts from a baseline: no reading.
	f.h.Counts[1] = 0
	before := s.Value()
	s.SampleAt(now.Add(100 * time.Millisecond))
	if s.Value() != before {
		t.Errorf("after a counter reset: Value = %v; want unchanged %v", s.Value(), before)
	}
}

func TestSchedPercentileOption(t *testing.T) {
	f := newFakeHist()
	s := NewSchedLatency(WithSchedSource(f.read), WithSchedSmoothing(0), WithSchedPercentile(0.5))
	s.SampleAt(t0)
	f.add(0, 50)
	f.add(3, 50)
	s.SampleAt(t0.Add(time.Second))
	// p50 of 50 in [0,1ms) and 50 in [10,100ms): rank 50 ends bucket 0 → 1 ms.
	if got := s.Value(); math.Abs(got-0.001) > 1e-12 {
		t.Errorf("p50 = %v; want 0.001", got)
	}
}

func TestSchedRealRuntime(t *testing.T) {
	h := runtimeSchedLatencies()()
	if h == nil || len(h.Buckets) != len(h.Counts)+1 {
		t.Fatalf("runtime/metrics %s: got %v", schedMetric, h)
	}
	s := NewSchedLatency()
	s.SampleAt(time.Now())
	done := make(chan struct{})
	for range 100 {
		go func() { done <- struct{}{} }()
	}
	for range 100 {
		<-done
	}
	s.SampleAt(time.Now().Add(100 * time.Millisecond))
	if v := s.Value(); math.IsNaN(v) || v < 0 || v > 10 {
		t.Errorf("Value = %v; want a plausible latency in seconds", v)
	}
	if s.Name() != "sched_latency" || s.Target() != 0.05 || s.Period() != 50*time.Millisecond {
		t.Errorf("defaults: %s %v %v", s.Name(), s.Target(), s.Period())
	}
}

// TestSchedUnread: Unread reads the runtime's count of goroutines waiting
// for a processor when called. With one P and fifty goroutines spinning,
// the goroutine that asks is the one running: most of the fifty wait.
// Without the metric it reads NaN.
func TestSchedUnread(t *testing.T) {
	s := NewSchedLatency()
	if u := s.Unread(); math.IsNaN(u) || u < 0 {
		t.Fatalf("Unread = %v at rest; want a count (runtime/metrics %s)", u, runnableMetric)
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for !stop.Load() {
			}
		})
	}
	runtime.Gosched()
	u := s.Unread()
	stop.Store(true)
	wg.Wait()
	if u < 25 {
		t.Errorf("Unread = %v with 50 goroutines spinning on one P; want most of them", u)
	}

	missing := NewSchedLatency()
	missing.cfg.queued = func(*[]metrics.Sample) (float64, bool) { return 0, false }
	if u := missing.Unread(); !math.IsNaN(u) {
		t.Errorf("Unread = %v without the metric; want NaN", u)
	}
}

func TestSchedBadOptions(t *testing.T) {
	tests := []struct {
		opt  SchedOption
		want string
	}{
		{WithSchedTarget(-time.Millisecond), "WithSchedTarget(-1ms): must be in (0, 10s] (0 means the default, 50ms)"},
		{WithSchedTarget(time.Minute), "WithSchedTarget(1m0s): must be in (0, 10s] (0 means the default, 50ms)"},
		{WithSchedPercentile(-0.5), "WithSchedPercentile(-0.5): must be in (0, 1] (0 means the default, 0.99)"},
		{WithSchedPercentile(1.5), "WithSchedPercentile(1.5): must be in (0, 1] (0 means the default, 0.99)"},
		{WithSchedPercentile(math.NaN()), "WithSchedPercentile(NaN): must be in (0, 1] (0 means the default, 0.99)"},
		{WithSchedPeriod(time.Millisecond), "WithSchedPeriod(1ms): must be in [10ms, 1m] (0 means the default, 50ms)"},
		{WithSchedSmoothing(-1), "WithSchedSmoothing(-1ns): must be in [0, 1m] (0 means none)"},
	}
	for _, tt := range tests {
		got := panicMessage(func() { NewSchedLatency(tt.opt) })
		if want := "pressure: " + tt.want; got != want {
			t.Errorf("NewSchedLatency panicked with %q; want %q", got, want)
		}
	}
	s := NewSchedLatency(WithSchedTarget(0), WithSchedPercentile(0), WithSchedPeriod(0), WithSchedSource(nil))
	if s.Target() != 0.05 || s.cfg.p != 0.99 || s.Period() != 50*time.Millisecond || s.cfg.read == nil {
		t.Errorf("zero options: target %v percentile %v period %v reader %v; want the defaults", s.Target(), s.cfg.p, s.Period(), s.cfg.read != nil)
	}
}

// panicMessage returns what f panicked with, formatted; "" if it did not.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
