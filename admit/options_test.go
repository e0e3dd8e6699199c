package admit

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

func TestOptionsOutOfRangePanic(t *testing.T) {
	shed := func(l Limit) Quota {
		var q Quota
		q.ByCriticality[levee.Sheddable] = l
		return q
	}
	tests := []struct {
		opt  Option
		want string // the panic message starts with it
	}{
		{WithPeriod(-time.Second), "admit: WithPeriod(-1s): must be in [1ms, 1m] (0 means the default, 50ms)"},
		{WithPeriod(time.Microsecond), "admit: WithPeriod(1µs): "},
		{WithPeriod(time.Hour), "admit: WithPeriod(1h0m0s): "},
		{WithQuota("", Quota{Rate: 1}), `admit: WithQuota("", `},
		{WithQuota("t", Quota{Rate: -1}), `admit: WithQuota("t", `},
		{WithQuota("t", Quota{Rate: math.NaN()}), `admit: WithQuota("t", `},
		{WithQuota("t", Quota{Rate: math.Inf(1)}), `admit: WithQuota("t", `},
		{WithQuota("t", Quota{Rate: 1, Burst: -1}), `admit: WithQuota("t", `},
		{WithQuota("t", shed(Limit{Rate: -2})), `admit: WithQuota("t", `},
		{WithRunQueue(-time.Millisecond), "admit: WithRunQueue(-1ms): must be in [0, 1h] (0 turns the run queue off)"},
		{WithRunQueue(2 * time.Hour), "admit: WithRunQueue(2h0m0s): "},
		{WithRunBound(-1), "admit: WithRunBound(-1): must be in [0, 1e6] (0 means the learned bound)"},
	}
	for _, tt := range tests {
		got := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			New(tt.opt)
			return "no panic"
		}()
		if !strings.HasPrefix(got, tt.want) {
			t.Errorf("New: panic %q, want one starting %q", got, tt.want)
		}
	}
	// The quota messages name the field at fault.
	for _, tt := range []struct {
		q    Quota
		want string
	}{
		{Quota{Rate: -1}, "): Rate must be finite and ≥ 0 (0 means no limit)"},
		{Quota{Rate: 1, Burst: -1}, "): Burst must be ≥ 0 (0 means max(1, Rate))"},
		{shed(Limit{Rate: -2}), "): ByCriticality[SHEDDABLE].Rate must be finite and ≥ 0 (0 means no limit)"},
	} {
		got := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			New(WithQuota("t", tt.q))
			return "no panic"
		}()
		if !strings.HasSuffix(got, tt.want) {
			t.Errorf("WithQuota(%+v): panic %q, want one ending %q", tt.q, got, tt.want)
		}
	}
}

func TestOptionsZeroAndNil(t *testing.T) {
	var c config
	for _, o := range []Option{WithPeriod(0), WithRunQueue(0), WithRunBound(0), WithRoute(nil), WithObserver(nil), WithLogger(nil), WithDegrade(nil)} {
		o(&c)
	}
	if c.period != 0 || c.runWait != 0 || c.runBound != 0 || c.route != nil || c.observer != nil || c.logger != nil || c.degrade != nil {
		t.Errorf("zero and nil options changed the config: %+v", c)
	}
	c = config{period: DefaultPeriod}
	WithPeriod(0)(&c)
	if c.period != DefaultPeriod {
		t.Errorf("WithPeriod(0): period %v, want the default %v", c.period, DefaultPeriod)
	}
	WithQuota("t", Quota{})(&c)
	if len(c.quotas) != 1 {
		t.Errorf("WithQuota with a zero Quota (no limit): %d quotas, want 1", len(c.quotas))
	}
}

func TestSignalStateLoad(t *testing.T) {
	tests := []struct {
		s    SignalState
		want float64
	}{
		{SignalState{Value: 0.4, Target: 0.8}, 0.5},
		{SignalState{Value: 0, Target: 0.005}, 0},
		{SignalState{Value: math.NaN(), Target: 0.8}, math.NaN()},
		{SignalState{Value: 1, Target: 0}, math.NaN()},
		{SignalState{Value: 1, Target: -1}, math.NaN()},
		{SignalState{Value: 1, Target: math.NaN()}, math.NaN()},
	}
	for _, tt := range tests {
		got := tt.s.Load()
		if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
			t.Errorf("%+v.Load() = %v, want %v", tt.s, got, tt.want)
		}
	}
}
