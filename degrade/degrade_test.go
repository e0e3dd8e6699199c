package degrade

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

func TestLevels(t *testing.T) {
	t0 := time.Unix(0, 0)
	type step struct {
		at   time.Duration
		load float64
		want Level
	}
	tests := []struct {
		name  string
		opts  []Option
		steps []step
	}{
		{"rise at once, thresholds 0.85 0.90 0.95", nil, []step{
			{0, 0.5, 0}, {1, 0.849, 0}, {2, 0.85, 1}, {3, 0.9, 2}, {4, 0.95, 3}, {5, 5, 3},
		}},
		{"fall one level per hold below threshold−hysteresis", nil, []step{
			{0, 1.0, 3},
			{100 * time.Millisecond, 0.91, 3}, // above 0.95−0.05: stays
			{200 * time.Millisecond, 0.89, 3}, // below: hold starts
			{1100 * time.Millisecond, 0.5, 3},
			{1200 * time.Millisecond, 0.5, 2},
			{2100 * time.Millisecond, 0.5, 2},
			{2200 * time.Millisecond, 0.5, 1},
			{3200 * time.Millisecond, 0.5, 0},
		}},
		{"a reading back above resets the hold", nil, []step{
			{0, 0.86, 1},
			{100 * time.Millisecond, 0.7, 1},
			{900 * time.Millisecond, 0.84, 1}, // within hysteresis
			{1500 * time.Millisecond, 0.7, 1},
			{2400 * time.Millisecond, 0.7, 1},
			{2500 * time.Millisecond, 0.7, 0},
		}},
		{"NaN counts as 0", nil, []step{{0, math.NaN(), 0}}},
		{"options", []Option{WithTarget(0.5), WithMax(1), WithHold(0), WithHysteresis(0)}, []step{
			{0, 0.49, 0}, {1, 0.5, 1}, {2, 2, 1}, {3, 0.49, 0},
		}},
		{"zero target and max mean the defaults", []Option{WithTarget(0), WithMax(0)}, []step{
			{0, 0.84, 0}, {1, 0.85, 1}, {2, 0.95, 3}, {3, 2, 3},
		}},
	}
	for _, tt := range tests {
		d := New(tt.opts...)
		for _, s := range tt.steps {
			if got := d.StepAt(t0.Add(s.at), s.load); got != s.want {
				t.Errorf("%s: at %v load %v: level %d, want %d", tt.name, s.at, s.load, got, s.want)
			}
			if got := d.Level(); got != s.want {
				t.Errorf("%s: Level() = %d after StepAt returned %d", tt.name, got, s.want)
			}
		}
	}
}

func TestForceExpires(t *testing.T) {
	t0 := time.Unix(0, 0)
	d := New()
	d.StepAt(t0, 0.5)
	d.Force(7, t0.Add(time.Second)) // clamped to Max
	if got := d.Level(); got != 3 {
		t.Errorf("forced level = %d, want 3 (clamped)", got)
	}
	if l, until, ok := d.Forced(t0.Add(500 * time.Millisecond)); !ok || l != 3 || !until.Equal(t0.Add(time.Second)) {
		t.Errorf("Forced = %d %v %v", l, until, ok)
	}
	if got := d.StepAt(t0.Add(999*time.Millisecond), 0.5); got != 3 {
		t.Errorf("before expiry: %d, want 3", got)
	}
	if got := d.StepAt(t0.Add(time.Second), 0.5); got != 0 {
		t.Errorf("at expiry: %d, want 0", got)
	}
	if _, _, ok := d.Forced(t0.Add(time.Second)); ok {
		t.Error("drill still reported after expiry")
	}
	d.Force(1, t0.Add(time.Hour))
	d.Force(0, time.Time{}) // cancel
	if got := d.StepAt(t0.Add(2*time.Second), 0.5); got != 0 {
		t.Errorf("after cancel: %d, want 0", got)
	}
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	if got := FromContext(ctx); got != 0 {
		t.Errorf("FromContext(empty) = %d", got)
	}
	for _, l := range []Level{0, 2, 8, 42} {
		if got := FromContext(WithLevel(ctx, l)); got != l {
			t.Errorf("FromContext(WithLevel(%d)) = %d", l, got)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	d := New()
	var wg sync.WaitGroup
	t0 := time.Unix(0, 0)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := range 1000 {
			d.StepAt(t0.Add(time.Duration(i)*time.Millisecond), float64(i%100)/80)
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 1000 {
			_ = d.Level()
			if i%100 == 0 {
				d.Force(1, t0.Add(time.Duration(i)*time.Millisecond))
			}
		}
	}()
	wg.Wait()
}

func TestOptionsOutOfRangePanic(t *testing.T) {
	tests := []struct {
		opt  Option
		want string
	}{
		{WithTarget(1.5), "degrade: WithTarget(1.5): must be in (0, 1] (0 means the default, 0.85)"},
		{WithTarget(-0.1), "degrade: WithTarget(-0.1): must be in (0, 1] (0 means the default, 0.85)"},
		{WithTarget(math.NaN()), "degrade: WithTarget(NaN): must be in (0, 1] (0 means the default, 0.85)"},
		{WithHysteresis(-0.01), "degrade: WithHysteresis(-0.01): must be in [0, 1]"},
		{WithHysteresis(math.NaN()), "degrade: WithHysteresis(NaN): must be in [0, 1]"},
		{WithMax(-1), "degrade: WithMax(-1): must be in [1, 100] (0 means the default, 3)"},
		{WithMax(101), "degrade: WithMax(101): must be in [1, 100] (0 means the default, 3)"},
		{WithHold(-time.Second), "degrade: WithHold(-1s): must be in [0, 1h]"},
	}
	for _, tt := range tests {
		got := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			New(tt.opt)
			return "no panic"
		}()
		if got != tt.want {
			t.Errorf("New: panic %q, want %q", got, tt.want)
		}
	}
}
