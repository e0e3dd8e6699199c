package pressure

import (
	"testing"
	"time"
)

func TestSetTarget(t *testing.T) {
	cpu, err := NewCPU(WithCgroupFS(nil), WithProcessCPU(func() (time.Duration, error) { return 0, nil }))
	if err != nil {
		t.Fatal(err)
	}
	sched := NewSchedLatency()
	queue := NewQueueDelay()
	for _, tc := range []struct {
		name    string
		set     func() error
		got     func() float64
		want    float64
		wantErr bool
	}{
		{"cpu", func() error { return cpu.SetTarget(0.7) }, cpu.Target, 0.7, false},
		{"cpu out of range", func() error { return cpu.SetTarget(3) }, cpu.Target, 0.7, true},
		{"cpu zero", func() error { return cpu.SetTarget(0) }, cpu.Target, 0.7, true},
		{"sched", func() error { return sched.SetTarget(20 * time.Millisecond) }, sched.Target, 0.02, false},
		{"sched out of range", func() error { return sched.SetTarget(-time.Second) }, sched.Target, 0.02, true},
		{"queue", func() error { return queue.SetTarget(10 * time.Millisecond) }, queue.Target, 0.01, false},
		{"queue out of range", func() error { return queue.SetTarget(2 * time.Minute) }, queue.Target, 0.01, true},
	} {
		err := tc.set()
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: err = %v, want error %v", tc.name, err, tc.wantErr)
		}
		if got := tc.got(); got != tc.want {
			t.Errorf("%s: Target() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSetTargetConcurrent changes a target while it is read (run with
// -race).
func TestSetTargetConcurrent(t *testing.T) {
	q := NewQueueDelay()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			_ = q.SetTarget(time.Duration(i%10+1) * time.Millisecond)
		}
	}()
	for range 1000 {
		if v := q.Target(); v <= 0 || v > 0.01 {
			t.Fatalf("Target() = %v, want in (0, 0.01]", v)
		}
	}
	<-done
}
