package throttle

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// panicMessage runs f and returns what it panicked with, formatted, and whether
// it panicked.
func panicMessage(f func()) (msg string, panicked bool) {
	defer func() {
		if r := recover(); r != nil {
			msg, panicked = fmt.Sprint(r), true
		}
	}()
	f()
	return "", false
}

func panics(f func()) bool { _, p := panicMessage(f); return p }

func TestOptionsOutOfRangePanic(t *testing.T) {
	tests := []struct {
		opt  Option
		want string // the message starts with it
	}{
		{WithK(0.5), "throttle: WithK(0.5): must be in [1, +Inf)"},
		{WithK(-2), "throttle: WithK(-2): "},
		{WithK(math.NaN()), "throttle: WithK(NaN): "},
		{WithK(math.Inf(1)), "throttle: WithK(+Inf): "},
		{WithWindow(time.Second), "throttle: WithWindow(1s): must be in [2.4s, 24h]"},
		{WithWindow(-time.Minute), "throttle: WithWindow(-1m0s): "},
		{WithRecovery(-time.Second), "throttle: WithRecovery(-1s): must be in [0, 1h]"},
		{WithRecovery(2 * time.Hour), "throttle: WithRecovery(2h0m0s): "},
		{WithMaxKeys(-1), "throttle: WithMaxKeys(-1): must be in [1, 1e6]"},
	}
	for _, tt := range tests {
		for name, build := range map[string]func(){
			"New":      func() { New(tt.opt) },
			"NewGroup": func() { NewGroup(tt.opt) },
		} {
			msg, ok := panicMessage(build)
			if !ok || !strings.HasPrefix(msg, tt.want) {
				t.Errorf("%s: panic %q (panicked %v), want a panic starting %q", name, msg, ok, tt.want)
			}
		}
	}
}

func TestOptionsZeroMeansDefault(t *testing.T) {
	got := newConfig([]Option{WithK(0), WithWindow(0), WithMaxKeys(0)})
	want := newConfig(nil)
	if got != want {
		t.Errorf("zero options: config %+v, want the defaults %+v", got, want)
	}
	if c := newConfig([]Option{WithRecovery(0)}); c.recovery != 0 {
		t.Errorf("WithRecovery(0): recovery %v, want 0 (off)", c.recovery)
	}
	c := newConfig([]Option{WithK(1.1), WithWindow(longBuckets * tick), WithRecovery(time.Hour), WithMaxKeys(1)})
	if c.k != 1.1 || c.window != 2400*time.Millisecond || c.recovery != time.Hour || c.maxKeys != 1 {
		t.Errorf("in-range options not taken as given: %+v", c)
	}
}
