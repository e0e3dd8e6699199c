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
// yet, the Step arms a bound: admissions in the period beyond surgeFactor
// times the capacity learned so far (with a Poisson margin) switch the
// accept path to a plan that admits at the capacity, until the next Step
// takes over. One Admit in surgeEvery checks it, with four atomic loads.
const (
	surgeFactor = 2.0
	surgeEvery  = 16
)

// surge is the bound armed by a Step.
type surge struct {
	base  uint64 // arrivals counted at the Step
	limit uint64 // arrivals allowed in the period before the bound trips
	plan  *plan  // admits at the capacity; until is set when it trips
	fired atomic.Bool
}

// arm returns the bound for the period after a Step at now (the
// controller's scale), or nil: armed while degraded and not shedding,
// with a capacity learned.
func armSurge(arrived uint64, capEst float64, period float64, degraded, shedding bool) *surge {
	if !degraded || shedding || !(capEst > 0) {
		return nil
	}
	n := surgeFactor * capEst * period
	g := &surge{base: arrived, limit: uint64(n + 3*math.Sqrt(n) + 8)}
	g.plan = &plan{budgetRank: -1, surge: true}
	g.plan.pace.setPace(capEst, period)
	g.plan.pace.tau = 0 // no burst: the bound has let the burst in already
	return g
}

// check is called by one Admit in surgeEvery while no plan is in force:
// when the period's arrivals passed the bound, it publishes the surge plan
// (once) and returns it.
func (c *Controller) checkSurge(now int64) *plan {
	g := c.surge.Load()
	if g == nil || g.fired.Load() {
		return nil
	}
	var n uint64
	for cr := range levee.NumCriticalities {
		n += c.arrivals[cr].Load()
	}
	if n-g.base <= g.limit || !g.fired.CompareAndSwap(false, true) {
		return nil
	}
	g.plan.until = now + 2*int64(c.cfg.period)
	c.plan.CompareAndSwap(nil, g.plan)
	return c.plan.Load()
}
