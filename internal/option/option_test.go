package option

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{New("throttle", "WithK", "must be ≥ 1", 0.5), "throttle: WithK(0.5): must be ≥ 1"},
		{New("retry", "WithFloor", "n must be ≥ 0", -1, 1500*time.Millisecond), "retry: WithFloor(-1, 1.5s): n must be ≥ 0"},
		{New("admit", "WithQuota", "the tenant must not be empty", "", 3), `admit: WithQuota("", 3): the tenant must not be empty`},
		{New("degrade", "WithHold", "must be ≥ 0"), "degrade: WithHold(): must be ≥ 0"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	Check(true, "limit", "WithMinLimit", "must be ≥ 1", 0) // no panic
	defer func() {
		r := recover()
		err, ok := r.(error)
		var oe *Error
		if !ok || !errors.As(err, &oe) {
			t.Fatalf("Check(false, ...) panicked with %#v, want an *Error", r)
		}
		if want := "limit: WithMinLimit(-2): must be ≥ 1"; oe.Error() != want {
			t.Errorf("panic message %q, want %q", oe.Error(), want)
		}
	}()
	Check(false, "limit", "WithMinLimit", "must be ≥ 1", -2)
	t.Fatal("Check(false, ...) did not panic")
}

func TestSet(t *testing.T) {
	k := 2.0
	Set(&k, 0, false, "throttle", "WithK", "must be ≥ 1") // zero: the default stays
	if k != 2 {
		t.Errorf("Set with zero: %v, want the default 2 kept", k)
	}
	Set(&k, 1.5, true, "throttle", "WithK", "must be ≥ 1")
	if k != 1.5 {
		t.Errorf("Set with an in-range value: %v, want 1.5", k)
	}
	for _, tt := range []struct {
		args []any
		want string
	}{
		{nil, "throttle: WithK(0.5): must be ≥ 1"},
		{[]any{0.5, time.Second}, "throttle: WithK(0.5, 1s): must be ≥ 1"},
	} {
		got := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			Set(&k, 0.5, false, "throttle", "WithK", "must be ≥ 1", tt.args...)
			return "no panic"
		}()
		if got != tt.want {
			t.Errorf("Set out of range: panic %q, want %q", got, tt.want)
		}
	}
	if k != 1.5 {
		t.Errorf("a value out of range was stored: %v", k)
	}
}
