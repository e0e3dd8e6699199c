package option

import (
	"errors"
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
