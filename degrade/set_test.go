package degrade

import (
	"testing"
	"time"
)

func TestSetters(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := New()
	if got := d.StepAt(t0, 0.87); got != 1 {
		t.Fatalf("level at load 0.87 with target 0.85 = %d, want 1", got)
	}
	if err := d.SetTarget(0.95); err != nil {
		t.Fatal(err)
	}
	if err := d.SetHold(0); err != nil {
		t.Fatal(err)
	}
	// 0.87 is now below the new target minus the hysteresis: with no hold
	// the level falls at once.
	if got := d.StepAt(t0.Add(time.Second), 0.87); got != 0 {
		t.Errorf("level at load 0.87 after SetTarget(0.95) = %d, want 0", got)
	}
	if got := d.StepAt(t0.Add(2*time.Second), 1.0); got != 3 {
		t.Errorf("level at load 1.0 = %d, want 3", got)
	}
	if err := d.SetMax(2); err != nil {
		t.Fatal(err)
	}
	if got := d.Level(); got != 2 {
		t.Errorf("level after SetMax(2) = %d, want 2", got)
	}
	if got := d.StepAt(t0.Add(3*time.Second), 1.0); got != 2 {
		t.Errorf("level at load 1.0 with max 2 = %d, want 2", got)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"target 0", d.SetTarget(0)},
		{"target 1.5", d.SetTarget(1.5)},
		{"hysteresis -1", d.SetHysteresis(-1)},
		{"max 0", d.SetMax(0)},
		{"hold -1s", d.SetHold(-time.Second)},
	} {
		if tc.err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
	if got := d.Target(); got != 0.95 {
		t.Errorf("Target() after refused changes = %v, want 0.95", got)
	}
	if got := d.Max(); got != 2 {
		t.Errorf("Max() after refused changes = %v, want 2", got)
	}
}

// TestSettersConcurrent changes the parameters while the level is forced,
// stepped and read (run with -race: Max, Target and Force read what the
// setters write).
func TestSettersConcurrent(t *testing.T) {
	d := New()
	t0 := time.Unix(1000, 0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 500 {
			_ = d.SetMax(Level(1 + i%5))
			_ = d.SetTarget(0.5 + float64(i%5)/10)
		}
	}()
	for i := range 500 {
		d.Force(Level(i%7), t0.Add(time.Hour))
		d.StepAt(t0.Add(time.Duration(i)*time.Millisecond), 0.9)
		if l, m := d.Level(), d.Max(); l < 0 || m < 1 || d.Target() <= 0 {
			t.Fatalf("level %d, max %d, target %v", l, m, d.Target())
		}
	}
	<-done
}
