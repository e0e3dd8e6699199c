package leveeprom

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-dev/levee/admit"
)

func TestEventCollector(t *testing.T) {
	c := NewEventCollector()
	for _, k := range []admit.EventKind{admit.OverloadStart, admit.DegradeChanged, admit.DegradeChanged, admit.OverloadEnd, 0, 200} {
		c.Observe(admit.Event{Kind: k})
	}
	golden(t, c, "events.prom")
	if allocs := testing.AllocsPerRun(100, func() { c.Observe(admit.Event{Kind: admit.DrillStart}) }); allocs != 0 {
		t.Errorf("Observe: %v allocs, want 0", allocs)
	}
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

// TestEventCollectorController runs a degradation drill on a real
// controller on virtual time and checks that the collector saw it.
func TestEventCollectorController(t *testing.T) {
	ev := NewEventCollector()
	ctl := admit.New(admit.WithObserver(ev.Observe))
	ctl.Step(t0)
	ctl.Degrade().Force(2, t0.Add(time.Second))
	for i := 1; i <= 40; i++ {
		ctl.Step(t0.Add(time.Duration(i) * admit.DefaultPeriod))
	}
	for _, k := range []admit.EventKind{admit.DrillStart, admit.DrillEnd, admit.DegradeChanged} {
		if got := ev.counts.Count(k); got == 0 {
			t.Errorf("%s = 0 after a drill, want ≥ 1", k)
		}
	}
}
