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
// at the onset. So while nothing is shed yet — while the degradation level
// is up, and before that once the service time of a request running alone
// is known — the Step arms a bound: when the period's arrivals pass
// surgeFactor times the capacity learned so far (with a Poisson margin,
// and never below what the capacity runs in one such service time), the
// accept path switches to a plan that admits about the capacity until the
// next Step takes over. One Admit in surgeEvery checks it, with five atomic
// loads. The plan keeps the order of sacrifice: from the arrivals of each
// criticality since the Step, the Admit that trips the bound computes the
// ladder's shares (SHEDDABLE first, CRITICAL_PLUS last) that bring the
// admitted rate to the capacity, into a plan the Step preallocated.
//
// The bound is armed while shedding, too, when the Step measured fewer
// arrivals than the capacity: its plan then sheds little or nothing, but
// a saturated process reads its connections late, behind the admitted
// handlers, so a Step can measure a few dozen arrivals a second while
// thousands wait unread, and the reader then hands over the whole backlog
// at one instant. A one-core gRPC server at a 5× onset did exactly that
// (its Step saw the signal at 7.9 times its target and 61 arrivals a
// second, then admitted 1,785 calls read at once, 1.8 s of work;
// TestStarvedReaderBatch replays it). Armed so, the bound admits the law's
// target if that is below the capacity. A plan computed from arrivals at
// or above the capacity bounds what it admits by its shares, and keeps
// its tenant entries, which the bound's plan would drop.
const (
	surgeFactor = 2.0
	surgeEvery  = 16
)

// surge is the bound armed by a Step.
type surge struct {
	base   [levee.NumCriticalities]uint64 // arrivals counted at the Step, per criticality
	at     int64                          // the Step (the controller's scale)
	limit  uint64                         // arrivals allowed in the period before the bound trips
	capEst float64                        // the rate to admit, requests per second
	plan   *plan                          // filled and published when the bound trips
	fired  atomic.Bool
}

// armSurge returns the bound for the period after a Step at now (the
// controller's scale) that counted arrived per criticality and measured
// the arrival rate R, or nil: armed once a capacity is learned — while
// degraded, and before that once the service time of a request running
// alone (solo, seconds; 0 while unknown) is known — unless a plan sheds
// shares of an arrival rate at or above the capacity (the plan then
// bounds what it admits; replacing it would drop its tenant entries; a
// plan whose aim is above the arrival rate sheds nothing and bounds
// nothing). It admits the capacity, or while shedding the law's target if
// that is lower. It trips at surgeFactor times the capacity, or at ceil,
// the most the capacity can be (law.capCeil), if that is higher: a
// capacity learned at light load is only a floor, and arrivals twice that
// floor may fit; and never below what the capacity runs in one solo
// service time (capacity × solo, the requests it runs at once): a burst
// of 64 one-second requests on 64 cores doubles their latency at most,
// where twice the capacity for a period (6 requests) would refuse most of
// it.
//
// Why before degradation too: degradation rises at the first Step that
// sees a flood, and on a saturated process that Step runs late, behind
// the work the flood's first requests started — a one-core gRPC server
// at a 5× onset from 0.7 of its capacity admitted 426 calls of 1 ms in
// the 100 ms before its first Step ran (0.43 s of work), its connection
// readers and its Steps starved behind them for 0.4 s, and the requests
// read after that were too old to serve (the gRPC lab, traced 2026-12-04;
// TestSurgeBeforeDegradation). The solo time is
// asked for at light load, where a burst is more often one that fits:
// without it the bound's length is not known.
//
// prev is the bound of the period before (nil: none): a bound that did not
// trip never published its plan, and its plan (15 KB) is taken for the new
// one rather than allocated again each period — claimed by tripping prev,
// so that no Admit still holding prev can fill it.
func armSurge(prev *surge, arrived [levee.NumCriticalities]uint64, now int64, capEst, ceil, R, target, period, solo float64, degraded, shedding bool) *surge {
	if !(capEst > 0) || !degraded && !(solo > 0) || shedding && R >= capEst && R > target {
		return nil
	}
	admit := capEst
	if shedding && target > 0 {
		admit = min(admit, target)
	}
	n := max(surgeFactor*capEst*period, ceil*period, capEst*solo)
	var p *plan
	if prev != nil && prev.fired.CompareAndSwap(false, true) {
		p = prev.plan // never published: as allocated
	} else {
		p = &plan{budgetRank: -1}
	}
	return &surge{base: arrived, at: now, capEst: admit, limit: uint64(n + 3*math.Sqrt(n) + 8), plan: p}
}

// checkSurge is called by one Admit in surgeEvery, with cur the plan it
// loaded: when the period's arrivals passed the bound, it fills the surge
// plan (once), publishes it in cur's place and returns the plan in force.
func (c *Controller) checkSurge(now int64, cur *plan) *plan {
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
	c.plan.CompareAndSwap(cur, p)
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
