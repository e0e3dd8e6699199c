package instrument

import (
	"math"
	"slices"
	"testing"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/overload"
)

func TestReadOverload(t *testing.T) {
	s := overload.Status{Level: overload.High, InFlight: 12, Cap: 40, Collections: 3,
		Resources: []overload.ResourceStatus{
			{Name: "memory", Value: 0.93, Used: 930, Limit: 1000, Level: overload.High},
			{Name: "gc_cpu", Value: math.NaN()},
		}}
	s.Actions[overload.KeepAlive] = overload.ActionStatus{Action: overload.KeepAlive, Active: true, ActiveSeconds: 2.5}
	s.Refused[overload.RefuseInFlight][levee.Sheddable] = 7
	got := collect(func(e Emit) { ReadOverload(s, e) })
	checkReadings(t, got, OverloadMetrics)
	find := func(m *Metric, lv ...string) float64 {
		for _, r := range got {
			if r.m == m && slices.Equal(r.lv, lv) {
				return r.v
			}
		}
		t.Fatalf("%s%v: not read", m.Name, lv)
		return 0
	}
	for _, tt := range []struct {
		m    *Metric
		lv   []string
		want float64
	}{
		{OverloadLevel, nil, 2},
		{OverloadResourceRatio, []string{"memory"}, 0.93},
		{OverloadResourceUsed, []string{"memory"}, 930},
		{OverloadResourceLimit, []string{"memory"}, 1000},
		{OverloadResourceLevel, []string{"memory"}, 2},
		{OverloadActionActive, []string{"keep_alive_off"}, 1},
		{OverloadActionSeconds, []string{"keep_alive_off"}, 2.5},
		{OverloadRefusals, []string{"SHEDDABLE", "in_flight"}, 7},
		{OverloadRefusals, []string{"CRITICAL", "critical_only"}, 0},
		{OverloadInFlight, nil, 12},
		{OverloadInFlightCap, nil, 40},
		{OverloadCollections, nil, 3},
	} {
		if got := find(tt.m, tt.lv...); got != tt.want {
			t.Errorf("%s%v = %v, want %v", tt.m.Name, tt.lv, got, tt.want)
		}
	}
	if got := find(OverloadResourceRatio, "gc_cpu"); !math.IsNaN(got) {
		t.Errorf("gc_cpu ratio %v, want NaN (no reading)", got)
	}
	var actions, refusals int
	for _, r := range got {
		switch r.m {
		case OverloadActionActive:
			actions++
		case OverloadRefusals:
			refusals++
		}
	}
	if actions != overload.NumActions || refusals != 3*levee.NumCriticalities {
		t.Errorf("%d action readings, %d refusal readings; want one per action, one per kind and criticality", actions, refusals)
	}
}
