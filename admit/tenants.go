package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/fairq"
)

// tenants is the plan stage's tenant accounting: it drains the accept
// path's samples into a bounded heavy-hitter tracker, adapts the sampling
// ratio, and turns the shed rate into a plan over tenants and the ladder.
type tenants struct {
	tracker *fairq.Tracker
	heavy   []fairq.Tenant // reused between periods
}

func newTenants() tenants { return tenants{tracker: fairq.NewTracker(0)} }

// observe closes a period of dt (ns) at now (ns): the samples taken at
// weight 2^shift go into the tracker, and the returned shift keeps the
// ring about half full at perPeriod arrivals a period.
func (t *tenants) observe(ring *fairq.Ring, shift uint32, now, dt int64, perPeriod float64) uint32 {
	weight := float64(uint64(1) << shift)
	ring.Drain(func(v uint64) { t.tracker.Add(v, weight) })
	t.tracker.Step(time.Unix(0, now), time.Duration(dt))
	ns := uint32(minSampleShift)
	for ns < 40 && perPeriod/float64(uint64(1)<<ns) > ringTarget {
		ns++
	}
	return ns
}

// active returns the estimated number of active tenants, at least 1.
func (t *tenants) active() float64 { return max(1, t.tracker.Active()) }

// planIn is the plan stage's input for one period.
type planIn struct {
	shed     float64                         // rate to shed
	R        float64                         // eligible arrival rate
	mix      [levee.NumCriticalities]float64 // R split between ranks
	capacity float64                         // divided among the active tenants
	aim      float64                         // admitted-rate aim (for the boundary slack)
	period   float64                         // seconds the plan's budgets must last
	arrived  uint64                          // arrivals counted so far (the tenants' sequences start here)
}

// plan maps the shed rate onto tenants and the ladder and returns the plan
// and the fair share it used.
func (t *tenants) plan(in planIn) (res planResult, fair float64) {
	fair = in.capacity / t.active()
	if !(in.shed > 0) {
		return res, fair
	}
	t.heavy = t.tracker.Top(t.heavy[:0], fair)
	// A tenant's sampled rate is noisy, and its errors do not cancel in
	// the plan: an overestimate is clipped to the arrival rate, an
	// underestimate leaves a phantom share to "other tenants" that
	// nobody uses (with one tenant at 87% shed, 5% of sampling error
	// admitted 17% less than the aim). Its share of all samples,
	// smoothed alike, has no such error: scale the rates by it.
	var sampled float64
	for _, v := range t.tracker.All() {
		sampled += v
	}
	if sampled > 0 {
		k := in.R / sampled
		for i := range t.heavy {
			for cl := range t.heavy[i].Rate {
				t.heavy[i].Rate[cl] *= k
			}
		}
	}
	res = buildPlan(planInput{shed: in.shed, rate: in.mix, tenants: t.heavy, fair: fair,
		period: in.period, slack: boundarySlack * in.aim})
	if res.p != nil && res.p.hasTenants {
		// Each plan continues the listed tenants' sequences where the
		// arrivals have got to: restarting them at 0 every period would
		// replay the same first few hundred points of the Weyl sequence,
		// whose error at a small admitted share (a few requests a period)
		// then repeats every period instead of averaging out.
		res.p.startTenants(in.arrived)
	}
	if math.IsNaN(res.level) {
		res.level = 0
	}
	return res, fair
}
