package overload_test

import (
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/overload"
)

// TestManagerAndDrill: the Manager's Shed action and a drill on the same
// admission controller keep their own floors. The Manager renews its
// floor every step without ending the drill; a drill set and cleared
// meanwhile leaves the Manager's floor; when the Manager stops its floor
// expires and the drill's stays.
func TestManagerAndDrill(t *testing.T) {
	ctl := admit.New()
	var mem overload.Reading
	m := overload.New(overload.WithShedder(ctl), overload.WithResources(overload.Resource{
		Name: "memory", Enter: [3]float64{0.9, 0.95, 0.98}, Read: func() overload.Reading { return mem },
	}))
	t0 := time.Unix(1_700_000_000, 0)
	now := t0
	run := func(d time.Duration, step bool) {
		for end := now.Add(d); now.Before(end); {
			now = now.Add(admit.DefaultPeriod)
			if step && (now.Sub(t0)%m.Period()) == 0 {
				m.Step(now)
			}
			ctl.Step(now)
		}
	}
	check := func(when string, drill, manager, level float64) {
		t.Helper()
		s := ctl.Snapshot()
		if s.ForcedShed != drill || s.OverloadShed != manager || s.ShedLevel != level {
			t.Errorf("%s: drill %v, manager %v, shed level %v; want %v, %v, %v", when, s.ForcedShed, s.OverloadShed, s.ShedLevel, drill, manager, level)
		}
	}
	ctl.Step(now)
	ctl.ForceShed(1, now.Add(time.Minute))
	mem = overload.Reading{Value: 0.96} // High: floor 2
	run(time.Second, true)
	check("drill 1, manager at high", 1, 2, 2)
	ctl.ForceShed(3, now.Add(time.Minute))
	run(time.Second, true)
	check("drill 3 over the manager's 2", 3, 2, 3)
	ctl.ForceShed(0, time.Time{})
	run(time.Second, true)
	check("drill cleared", 0, 2, 2)
	ctl.ForceShed(1.5, now.Add(time.Minute))
	m.Stop(now)
	run(time.Second, false)
	check("manager stopped", 1.5, 0, 1.5)
}
