package admit

import (
	"math"
	"sync/atomic"

	"github.com/levee-dev/levee"
)

// farAbove is how many fair shares a tenant must send to count as "far
// above its fair share": its excess above that is shed before any
// criticality is touched.
const farAbove = 2.0

// planSlots is the size of the published per-tenant table (open
// addressing); at most maxListed tenants are listed.
const (
	planSlots = 64
	maxListed = planSlots / 2
)

// plan is what Step publishes for the accept path while shedding: per rank
// (levee.Criticality.Rank), the share of requests to reject, for everyone
// and for the few tenants (or groups of tenants) listed. It is immutable
// once published except for its counters and budgets.
type plan struct {
	// budget, when budgetRank ≥ 0, is how many more requests of that rank
	// from unlisted tenants may be admitted until the next Step: a count
	// rather than a fraction, so that admissions follow the aim whatever
	// the arrivals do within the period. A retry takes from it only while
	// more than reserve is left (see shed).
	budget     atomic.Int64
	reserve    int64
	budgetRank int
	until      int64 // the plan is not applied after this (the controller's scale)
	all        [levee.NumCriticalities]bool
	thr        [levee.NumCriticalities]uint64 // reject if weyl(n) < thr
	forced     [levee.NumCriticalities]bool   // the rank's share is the forced level's (StageForced)
	hasTenants bool
	tenants    [planSlots]planTenant
}

// planTenant is one listed tenant (or group): per rank, first the tenant
// stage (cut entirely, or admitted at a paced rate), then the ladder (all,
// or a fraction by a Weyl sequence of the tenant's own).
type planTenant struct {
	key    uint64
	cutAll [levee.NumCriticalities]bool // the tenant stage takes every request
	capped [levee.NumCriticalities]bool // the tenant stage admits at pace
	pace   [levee.NumCriticalities]gcra
	all    [levee.NumCriticalities]bool // the ladder takes every request
	thr    [levee.NumCriticalities]uint64
	forced [levee.NumCriticalities]bool          // the ladder's share is the forced level's
	ctr    [levee.NumCriticalities]atomic.Uint64 // the tenant's requests, from start
	passed [levee.NumCriticalities]atomic.Uint64 // those past the tenant stage: the ladder's sequence
	start  uint64
	cut    atomic.Uint64 // rejected by the tenant stage
}

// weyl maps the n-th request of a class to [0, 2^64): consecutive values
// are spread evenly (the golden-ratio sequence), so rejecting those below
// f·2^64 rejects a share f of any run of requests, without randomness.
func weyl(n, off uint64) uint64 { return (n + off) * 0x9E3779B97F4A7C15 }

func fracThr(f float64) (all bool, thr uint64) {
	switch {
	case !(f > 0):
		return false, 0
	case f >= 1:
		return true, 0
	}
	return false, uint64(f * (1 << 64))
}

// find returns the entry listed under key, or nil.
func (p *plan) find(key uint64) *planTenant {
	i := key >> 58
	for k := uint64(0); k < planSlots; k++ {
		e := &p.tenants[(i+k)&(planSlots-1)]
		if e.key == key {
			return e
		}
		if e.key == 0 {
			return nil
		}
	}
	return nil
}

// shed returns the stage that rejects the request of rank r from tenant
// key with address prefixes l1 and l2 (0 = none) and class counter n, a
// retry if retry, at now (the controller's scale), or 0 when none does. A
// tenant listed by itself is judged by its entry; otherwise the nearest
// listed prefix's; otherwise the plan for everyone.
//
// In the partly shed rank, a retry takes from the period's budget for
// unlisted tenants only while more than half of it is left; the rest is
// kept for first attempts: shedding by request rather than by attempt. A
// client retrying at once sends every shed request three times either
// way; shed by attempt, a request is admitted on a retry as often as on a
// first attempt, and each one served costs more rejections before it
// (at half the rank served, 1.9 rejections a request instead of 1.5).
func (p *plan) shed(key, l1, l2 uint64, r int, n, off uint64, now int64, retry bool) Stage {
	if p.hasTenants {
		for _, k := range [3]uint64{key, l1, l2} {
			if k == 0 {
				continue
			}
			if e := p.find(k); e != nil {
				return e.shed(r, off, now)
			}
		}
	}
	if r == p.budgetRank {
		if retry && p.budget.Load() <= p.reserve || p.budget.Add(-1) < 0 {
			return ladderOr(p.forced[r])
		}
		return 0
	}
	if p.all[r] || weyl(n, off) < p.thr[r] {
		return ladderOr(p.forced[r])
	}
	return 0
}

// ladderOr is StageForced when forced, else StageLadder.
func ladderOr(forced bool) Stage {
	if forced {
		return StageForced
	}
	return StageLadder
}

func (e *planTenant) shed(r int, off uint64, now int64) Stage {
	e.ctr[r].Add(1)
	if e.all[r] {
		return ladderOr(e.forced[r])
	}
	if e.cutAll[r] {
		e.cut.Add(1)
		return StageTenant
	}
	if e.capped[r] {
		if _, ok := e.pace[r].take(now); !ok {
			e.cut.Add(1)
			return StageTenant
		}
	}
	// The ladder's fraction by a sequence of the requests that reach it:
	// the tenant stage's pace lets through the first of each burst, and a
	// fraction of the tenant's every request would be biased by that.
	if weyl(e.passed[r].Add(1), off) < e.thr[r] {
		return ladderOr(e.forced[r])
	}
	return 0
}

// setPace sets g to admit rate requests per second, with a burst of two
// periods' worth (at least two): random arrivals barely above the pace
// leave gaps, and a bucket that held less would admit less than the pace.
func (g *gcra) setPace(rate, period float64) {
	g.interval = max(1, int64(float64(1e9)/rate))
	g.tau = int64(max(1, math.Floor(2*rate*period)-1)) * g.interval
	g.tat.Store(math.MinInt64 / 2)
}

// startTenants starts every listed tenant's sequences at n.
func (p *plan) startTenants(n uint64) {
	for i := range p.tenants {
		if p.tenants[i].key != 0 {
			p.tenants[i].start = n
			for r := range p.tenants[i].ctr {
				p.tenants[i].ctr[r].Store(n)
				p.tenants[i].passed[r].Store(n)
			}
		}
	}
}

// unit is a tenant, or a group of tenants (an address prefix), as the plan
// sees it: its arrival rate per rank.
type unit struct {
	key  uint64
	rate [levee.NumCriticalities]float64 // by rank
}

func (u *unit) total() float64 { return u.rate[0] + u.rate[1] + u.rate[2] + u.rate[3] }

// planInput is what the ladder needs, all rates in requests per second.
type planInput struct {
	shed   float64                         // rate to shed
	rate   [levee.NumCriticalities]float64 // eligible arrivals per rank
	units  []unit                          // tenants far above their share, heaviest first
	heavy  []unit                          // tenants above their share (not far): first in the partial rank
	fair   float64                         // fair share per tenant, 0 = no tenant stage
	period float64                         // seconds until the next plan; 0 = fractions only
	slack  float64                         // shed rate a fully shed boundary may leave unshed
	floor  float64                         // forced shed level (ForceShed, OverloadShed), 0 = none
	drain  float64                         // rate to shed besides shed, to work a backlog off (law.go)
}

// planResult is the plan plus what Snapshot reports.
type planResult struct {
	p          *plan
	level      float64 // ShedLevel: full ranks + fraction of the partial one
	tenantShed float64 // rate planned to be shed from tenants far above their share
	rate       float64 // rate planned to be shed in all (tenants, ladder, floor)
	listed     int
	snapped    bool // the plan holds a level boundary, leaving up to slack unshed
}

// buildPlan maps a shed rate onto the order of sacrifice: first the excess
// of tenants far above their fair share (heaviest first, each tenant's own
// lowest criticalities first, each cut admitted up to a budget), then the
// ladder over ranks, a rank touched only when every lower one is fully
// shed; inside the partly shed rank, tenants above their fair share first.
// A forced level (in.floor) is a floor under every rank's share, for
// everyone (forced.go).
func buildPlan(in planInput) planResult {
	var res planResult
	if !(in.shed > 0) && !(in.floor > 0) && !(in.drain > 0) {
		return res
	}
	p := &plan{budgetRank: -1}
	res.p = p
	type trank struct {
		u    *unit
		rate [levee.NumCriticalities]float64 // by rank, within the total
		tot  float64
		take [levee.NumCriticalities]float64 // tenant-stage shed by rank
		far  bool
	}
	var ts []trank
	add := func(us []unit, far bool) {
		for i := range us {
			if len(ts) == maxListed {
				return
			}
			t := trank{u: &us[i], far: far}
			for r := range t.rate {
				t.rate[r] = min(max(0, us[i].rate[r]), in.rate[r]) // cannot exceed the total
				t.tot += t.rate[r]
			}
			ts = append(ts, t)
		}
	}
	add(in.units, true)
	add(in.heavy, false)
	S := max(0, in.shed)
	forced := floorFractions(in.floor)

	// Stage 1: excess of tenants far above their fair share.
	var ab []int // the tenants cut, heaviest first
	if in.fair > 0 {
		floor := farAbove * in.fair
		var excess float64
		for i := range ts {
			if ts[i].far && ts[i].tot > floor {
				ab = append(ab, i)
				excess += ts[i].tot - floor
			}
		}
		T := min(S, excess)
		if T > 0 {
			// Water-fill from the top: cut the heaviest down to a common
			// level M ≥ floor so that the cuts sum to T.
			M := floor
			var sum float64
			for j, i := range ab {
				sum += ts[i].tot
				m := (sum - T) / float64(j+1)
				if j+1 == len(ab) || m >= ts[ab[j+1]].tot {
					M = max(m, floor)
					break
				}
			}
			for _, i := range ab {
				x := max(0, ts[i].tot-M)
				for r := range levee.NumCriticalities {
					take := min(x, ts[i].rate[r])
					ts[i].take[r] = take
					x -= take
					res.tenantShed += take
				}
			}
		}
	}
	S -= res.tenantShed

	// Stage 2: the ladder on what is left.
	var rest [levee.NumCriticalities]float64
	for r := range rest {
		rest[r] = in.rate[r]
		for i := range ts {
			rest[r] -= ts[i].take[r]
		}
		rest[r] = max(0, rest[r])
	}
	full := 0
	lower := 0.0 // rate shed by the fully shed levels
	for full < levee.NumCriticalities && S > 1e-9 && S >= rest[full] {
		S -= rest[full]
		lower += rest[full]
		p.all[full] = true
		full++
	}
	fH, fO := 0.0, 0.0
	partial := -1
	if lower > 0 && full < levee.NumCriticalities && S > 1e-9 && S <= in.slack {
		// A clean boundary: every lower level is shed and what is left to
		// shed is within the slack. Holding the boundary costs a signal a
		// little above target; touching the next level would cost its
		// requests the noise of every period.
		res.snapped = true
		S = 0
	}
	// A flood's backlog is worked off at the expense of what the overload
	// already sheds, never of what the steady plan leaves whole: first in
	// the rank the ladder sheds in part (tenants above their fair share
	// first, as ever), or the one just above the ranks it sheds in full;
	// then, beyond it, at the ranks the tenant stage cuts the tenants far
	// above their share in (below). What neither can give is not shed:
	// the backlog then drains more slowly.
	D := max(0, in.drain)
	top := -1 // the highest rank the ladder sheds anything of
	if full < levee.NumCriticalities && (full > 0 || S > 1e-9) {
		top = full
		add := min(D, max(0, rest[full]-S))
		S += add
		D -= add
	} else if full > 0 {
		top = full - 1
	}
	above := func(t *trank) bool { return in.fair > 0 && t.tot > in.fair }
	listed := 0.0 // rate of the partial rank's listed tenants, after their cut
	// lad is the ladder's share of each rank, for everyone.
	var lad [levee.NumCriticalities]float64
	for r := range full {
		lad[r] = 1
	}
	if full < levee.NumCriticalities && S > 1e-9 && rest[full] > 0 {
		partial = full
		lad[partial] = min(1, S/rest[partial])
		var H float64
		for i := range ts {
			left := max(0, ts[i].rate[partial]-ts[i].take[partial])
			listed += left
			if above(&ts[i]) {
				H += left
			}
		}
		if S <= H {
			fH = S / H
		} else {
			fH = 1
			if rest[partial]-H > 0 {
				fO = (S - H) / (rest[partial] - H)
			}
		}
	}
	// The floor: no rank sheds less than the forced level says, for
	// unlisted tenants (fO) as for listed ones (below). A rank whose share
	// is the floor's reports its rejections as StageForced.
	ladH, ladO := fH, fO
	if partial >= 0 {
		fH, fO = max(fH, forced[partial]), max(fO, forced[partial])
	}
	for r := range levee.NumCriticalities {
		f := max(lad[r], forced[r])
		p.forced[r] = forced[r] > lad[r]
		if r == partial {
			f = fO
			p.forced[r] = forced[r] > ladO
		}
		p.all[r], p.thr[r] = fracThr(f)
		res.level += max(lad[r], forced[r])
		res.rate += rest[r] * max(lad[r], forced[r])
	}
	res.rate += res.tenantShed
	for _, i := range ab {
		for r := top + 1; r < levee.NumCriticalities && D > 0; r++ {
			if !(ts[i].take[r] > 0) {
				continue // a rank the tenant stage leaves whole
			}
			x := min(D, ts[i].rate[r]-ts[i].take[r])
			ts[i].take[r] += x
			res.tenantShed += x
			D -= x
		}
	}
	if partial >= 0 && in.period > 0 && fO < 1 {
		// Unlisted tenants' admissions in the partial rank as a count.
		others := max(0, rest[partial]-listed)
		p.budgetRank = partial
		n := int64(math.Round(others * (1 - fO) * in.period))
		p.budget.Store(n)
		p.reserve = n / 2
	}

	// Per-tenant entries where they differ from everyone else's.
	for i := range ts {
		var e *planTenant
		var cutAll, capped, all, byFloor [levee.NumCriticalities]bool
		var thr [levee.NumCriticalities]uint64
		var pace [levee.NumCriticalities]float64
		differs := false
		for r := range levee.NumCriticalities {
			l, ll := forced[r], 0.0 // the share, and the ladder's alone
			switch {
			case r < full:
				l, ll = 1, 1
			case r == partial && above(&ts[i]):
				l, ll = fH, ladH
			case r == partial:
				l, ll = fO, ladO
			}
			all[r], thr[r] = fracThr(l)
			byFloor[r] = forced[r] > ll
			take, rate := ts[i].take[r], ts[i].rate[r]
			switch {
			case r < full || !(take > 0):
			case take >= rate:
				cutAll[r] = true
			default:
				capped[r] = true
				pace[r] = rate - take
			}
			if take > 0 || (r == partial && l != fO) {
				differs = true
			}
		}
		if !differs {
			continue
		}
		key := ts[i].u.key
		for k := uint64(0); k < planSlots; k++ {
			e = &p.tenants[(key>>58+k)&(planSlots-1)]
			if e.key == 0 {
				e.key, e.cutAll, e.capped, e.all, e.thr, e.forced = key, cutAll, capped, all, thr, byFloor
				for r := range pace {
					if capped[r] {
						e.pace[r].setPace(pace[r], in.period)
					}
				}
				break
			}
		}
		p.hasTenants = true
		res.listed++
	}
	if math.IsNaN(res.level) {
		res.level = 0
	}
	return res
}

// carry continues the previous plan's paces where they have got to at
// now: a pace of a fraction of a request a period then admits that
// fraction over many periods, and a new plan does not grant a new burst.
// What a pace is ahead of now is carried in requests, not in time: one
// request admitted at a pace of 0.02/s is 50 s of debt at that pace and
// 20 ms at 50/s. Carried as time, a pace set while nothing could be
// served (an episode can enter at an admitted rate near 0: 0.014/s was
// read in the files lab, while a descriptor limit stalled the accept
// loop) and used once would keep its tenant refused for 50 s, whatever
// the paces of the plans after it (TestCarryInRequests).
func (p *plan) carry(prev *plan, now int64) {
	if p == nil || prev == nil {
		return
	}
	if !p.hasTenants || !prev.hasTenants {
		return
	}
	for i := range p.tenants {
		e := &p.tenants[i]
		if e.key == 0 {
			continue
		}
		old := prev.find(e.key)
		if old == nil {
			continue
		}
		for r := range e.pace {
			if e.capped[r] && old.capped[r] {
				e.pace[r].tat.Store(e.pace[r].rescale(&old.pace[r], now))
			}
		}
	}
}

// rescale returns old's theoretical arrival time re-expressed at g's
// interval: as many requests ahead of now (or behind it) as old was.
func (g *gcra) rescale(old *gcra, now int64) int64 {
	tat := old.tat.Load()
	if old.interval <= 0 || old.interval == g.interval {
		return tat
	}
	ahead := float64(tat-now) / float64(old.interval) * float64(g.interval)
	return now + int64(max(min(ahead, 1<<61), -(1<<61)))
}
