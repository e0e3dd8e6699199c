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
	mem, gc, files := NewMemory(WithMemoryCgroupFS(nil)), NewGCCPU(), NewOpenFiles()
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
		{"queue back to learned", func() error { return queue.SetTarget(0) }, queue.Target, 0.1, false},
		{"memory", func() error { return mem.SetTarget(0.7) }, mem.Target, 0.7, false},
		{"memory out of range", func() error { return mem.SetTarget(1.5) }, mem.Target, 0.7, true},
		{"gc_cpu", func() error { return gc.SetTarget(0.4) }, gc.Target, 0.4, false},
		{"gc_cpu zero", func() error { return gc.SetTarget(0) }, gc.Target, 0.4, true},
		{"open_files", func() error { return files.SetTarget(0.9) }, files.Target, 0.9, false},
		{"open_files out of range", func() error { return files.SetTarget(-1) }, files.Target, 0.9, true},
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

// TestSetTargetFixesTheQueueTarget: a target set while the signal runs
// replaces the learned one for good.
func TestSetTargetFixesTheQueueTarget(t *testing.T) {
	q := NewQueueDelay(WithQueueCPU(func() float64 { return 0.5 }))
	q.SampleAt(t0)
	for i := 1; i <= 10; i++ {
		for range 500 {
			q.Observe(0)
		}
		q.SampleAt(t0.Add(time.Duration(i) * 100 * time.Millisecond))
	}
	if got := q.Target(); got != 0.01 {
		t.Fatalf("learned target %v; want 0.01 (100 × 0.1 ms of CPU per request)", got)
	}
	if err := q.SetTarget(7 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	q.SampleAt(t0.Add(1100 * time.Millisecond))
	if got := q.Target(); got != 0.007 {
		t.Errorf("target %v after SetTarget(7ms) and a sample; want 0.007", got)
	}
	if err := q.SetTarget(0); err != nil || q.Target() != 0.01 {
		t.Errorf("SetTarget(0) = %v, target %v; want the learned 0.01 back", err, q.Target())
	}
}

// TestSetTargetConcurrent changes a target while it is read (run with
// -race).
func TestSetTargetConcurrent(t *testing.T) {
	q := NewQueueDelay(WithQueueTarget(5 * time.Millisecond))
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
