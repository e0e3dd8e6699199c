package pressure

import (
	"math"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestQueueDelayIntervalMinimum(t *testing.T) {
	q := NewQueueDelay(WithQueueTarget(5 * time.Millisecond))
	if !math.IsNaN(q.Value()) {
		t.Fatalf("before the first interval: Value = %v; want NaN", q.Value())
	}
	ms := time.Millisecond
	tests := []struct {
		name     string
		observe  []time.Duration
		want     float64
		observed bool
	}{
		{"burst that drains: one request did not wait", []time.Duration{30 * ms, 0, 12 * ms}, 0, true},
		{"standing queue: everyone waited ≥ 8 ms", []time.Duration{20 * ms, 8 * ms, 9 * ms}, 0.008, true},
		{"negative counts as 0", []time.Duration{-ms, 3 * ms}, 0, true},
		{"no request started", nil, 0, false},
		{"one request", []time.Duration{7 * ms}, 0.007, true},
	}
	now := t0
	q.SampleAt(now)
	for _, tt := range tests {
		for _, d := range tt.observe {
			q.Observe(d)
		}
		now = now.Add(100 * time.Millisecond)
		q.SampleAt(now)
		r := q.Reading()
		if q.Value() != tt.want || r.Observed != tt.observed {
			t.Errorf("%s: Value = %v (observed %v); want %v (observed %v)", tt.name, q.Value(), r.Observed, tt.want, tt.observed)
		}
		if q.Value() > q.Target() != (tt.want > 0.005) {
			t.Errorf("%s: above target = %v; want %v", tt.name, q.Value() > q.Target(), tt.want > 0.005)
		}
	}
}

func TestQueueDelayConcurrentObserve(t *testing.T) {
	q := NewQueueDelay()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				q.Observe(time.Duration(10+g*1000+i) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	q.SampleAt(t0)
	if got := q.Value(); got != 10e-6 {
		t.Errorf("minimum of concurrent observations = %v; want 10µs", got)
	}
}

func TestQueueDelaySmoothingAndOptions(t *testing.T) {
	q := NewQueueDelay(WithQueueTarget(10*time.Millisecond), WithQueueInterval(50*time.Millisecond), WithQueueSmoothing(100*time.Millisecond))
	if q.Target() != 0.01 || q.Period() != 50*time.Millisecond || q.Name() != "queue_delay" {
		t.Errorf("options: target %v period %v", q.Target(), q.Period())
	}
	q.Observe(20 * time.Millisecond)
	q.SampleAt(t0)
	q.Observe(0)
	q.SampleAt(t0.Add(100 * time.Millisecond))
	// 20 ms, then 0 after one time constant: 20 × e^-1.
	if got, want := q.Value(), 0.020*math.Exp(-1); math.Abs(got-want) > 1e-12 {
		t.Errorf("smoothed Value = %v; want %v", got, want)
	}
	for _, tt := range []struct {
		opt  QueueOption
		want string
	}{
		{WithQueueTarget(-time.Millisecond), "WithQueueTarget(-1ms)"},
		{WithQueueInterval(time.Millisecond), "WithQueueInterval(1ms)"},
		{WithQueueSmoothing(2 * time.Minute), "WithQueueSmoothing(2m0s)"},
	} {
		if got := panicMessage(func() { NewQueueDelay(tt.opt) }); !strings.HasPrefix(got, "pressure: "+tt.want) {
			t.Errorf("NewQueueDelay(%s) panicked with %q", tt.want, got)
		}
	}
}

func TestQueueDelayObserveAllocs(t *testing.T) {
	q := NewQueueDelay()
	d := 5 * time.Millisecond
	if n := testing.AllocsPerRun(1000, func() { q.Observe(d); d-- }); n != 0 {
		t.Errorf("Observe allocates %v times; want 0", n)
	}
}
