package admit

import (
	"math"
	"sync/atomic"

	"github.com/levee-dev/levee"
)

// The surge bound.
//
// A flood is seen in the arrivals at the first Step after it starts, which
// raises the degradation level; shedding starts at the next Step
// (degradation first). Until then every request is admitted: on a
// one-core server with 1 ms requests, a 5× flood admits a quarter of a
// second of work each period, and that backlog is what stalls the process
// at the onset. So while the degradation level is up and nothing is shed
// yet, the Step arms a bound: when the period's arrivals pass surgeFactor
// times the capacity learned so far (with a Poisson margin), the accept
// path switches to a plan that admits about the capacity until the next
// Step takes over. One Admit in surgeEvery checks it, with five atomic
// loads. The plan keeps the order of sacrifice: from the arrivals of each
// criticality since the Step, the Admit that trips the bound computes the
// ladder's shares (SHEDDABLE first, CRITICAL_PLUS last) that bring the
// admitted rate to the capacity, into a plan the Step preallocated.
const (
	surgeFactor = 2.0
	surgeEvery  = 16
)

// surge is the bound armed by a Step.
type surge struct {
	base   [levee.NumCriticalities]uint64 // arrivals counted at the Step, per criticality
	at     int64                          // the Step (the controller's scale)
	limit  uint64                         // arrivals allowed in the period before the bound trips
	capEst float64                        // the capacity to admit, requests per second
	plan   *plan                          // filled and published when the bound trips
	fired  atomic.Bool
}

// armSurge returns the bound for the period after a Step at now (the
// controller's scale) that counted arrived per criticality, or nil: armed
// while degraded and not shedding, with a capacity learned.
func armSurge(arrived [levee.NumCriticalities]uint64, now int64, capEst float64, period float64, degraded, shedding bool) *surge {
	if !degraded || shedding || !(capEst > 0) {
		return nil
	}
	n := surgeFactor * capEst * period
	return &surge{base: arrived, at: now, capEst: capEst, limit: uint64(n + 3*math.Sqrt(n) + 8), plan: &plan{budgetRank: -1}}
}

// checkSurge is called by one Admit in surgeEvery while no plan is in
// force: when the period's arrivals passed the bound, it fills the surge
// plan (once), publishes it and returns it.
func (c *Controller) checkSurge(now int64) *plan {
	g := c.surge.Load()
	if g == nil || g.fired.Load() {
		return nil
	}
	var a [levee.NumCriticalities]uint64
	var n uint64
	for cr := range levee.NumCriticalities {
		a[cr] = c.arrivals[cr].Load() - g.base[cr]
		n += a[cr]
	}
	if n <= g.limit || !g.fired.CompareAndSwap(false, true) {
		return nil
	}
	sec := float64(max(now-g.at, 1)) / 1e9
	var rate [levee.NumCriticalities]float64 // by rank
	total := 0.0
	for cr, v := range a {
		rate[levee.Criticality(cr).Rank()] = float64(v) / sec
		total += float64(v) / sec
	}
	p := g.plan
	for r, f := range ladderShares(rate, total-g.capEst) {
		p.all[r], p.thr[r] = fracThr(f)
	}
	p.until = now + 2*int64(c.cfg.period)
	c.plan.CompareAndSwap(nil, p)
	return c.plan.Load()
}

// ladderShares returns the share of each rank (by rate) to shed so that
// shed is shed, lowest rank first: the ladder alone, without tenants.
func ladderShares(rate [levee.NumCriticalities]float64, shed float64) (f [levee.NumCriticalities]float64) {
	for r := range rate {
		switch {
		case !(shed > 0):
			return f
		case shed >= rate[r]:
			f[r] = 1
		default:
			f[r] = shed / rate[r]
		}
		shed -= rate[r]
	}
	return f
}
