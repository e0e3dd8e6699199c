package sim

import (
	"bytes"
	"math"
	"testing"
	"time"
)

// TestFleetQuotaAtScale runs DefaultFleetScenario (100 instances, 1000
// tenants; 20 instances and 200 tenants under -short and -race) and checks
// what holds at scale for the dense tenants (see FleetWindow): no tenant
// over its quota gets more than its burst above it, the median one gets within
// 10% of it once the demand estimates have settled (after the outage),
// and the tenants under their quota lose few requests; with the store
// lost, every instance keeps to its local share, so that nobody goes
// above its quota, the tenants spread over every instance keep about
// their quota and the sticky ones only the shares of their few
// instances. The sparse tenants' figures are logged, not checked: their
// quotas are a fraction of a request per instance per second.
func TestFleetQuotaAtScale(t *testing.T) {
	s := DefaultFleetScenario()
	if light() {
		s.Instances, s.Tenants = 20, 200
		s.Duration, s.OutageFrom, s.OutageTo = 40*time.Second, 20*time.Second, 28*time.Second
	}
	rep, err := RunFleet(s)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteFleetTable(&buf, rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
	for _, w := range []struct {
		name string
		w    FleetWindow
	}{{"steady", rep.Steady}, {"after the outage", rep.After}} {
		// The default burst, 5 s of the quota, may be spent within a
		// window of 10 to 20 s: up to 1.25 of the quota.
		if w.w.OverMax > 1.25 {
			t.Errorf("%s: a dense tenant over its quota used %.2f of it, want ≤ 1.25", w.name, w.w.OverMax)
		}
	}
	// Under their quota, the dense tenants lose few requests once the
	// demand estimates have settled; in the first 30 s more (the sticky
	// tenants' shares are still growing).
	if r := rep.After.UnderRefused; r > 0.03 {
		t.Errorf("after the outage: %.2f%% of the requests of dense tenants under their quota refused, want ≤ 3%%", 100*r)
	}
	if r := rep.Steady.UnderRefused; r > 0.1 {
		t.Errorf("steady: %.2f%% of the requests of dense tenants under their quota refused, want ≤ 10%%", 100*r)
	}
	if m := rep.After.OverMedian; math.Abs(m-1) > 0.1 {
		t.Errorf("after the outage: the median dense tenant over its quota used %.3f of it, want 1 ±10%%", m)
	}
	if o := rep.Outage; o.OverMax > 1.25 || o.OverSpreadMedian < 0.8 || o.OverStickyMedian > 0.5 {
		t.Errorf("outage: dense over-quota tenants max %.2f, spread median %.2f, sticky median %.2f; want ≤ 1.25, ≥ 0.8, ≤ 0.5",
			o.OverMax, o.OverSpreadMedian, o.OverStickyMedian)
	}
}

func TestFleetDeterministic(t *testing.T) {
	s := FleetScenario{Instances: 5, Tenants: 30, Duration: 8 * time.Second, Warmup: 4 * time.Second, Seed: 7}
	a, err := RunFleet(s)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := RunFleet(s)
	if a != b {
		t.Errorf("two runs of one scenario differ:\n%+v\n%+v", a, b)
	}
}
