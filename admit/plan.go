package admit

import (
	"math"
	"sync/atomic"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/fairq"
)

// farAbove is how many fair shares a tenant must send to count as "far
// above its fair share": its excess above that is shed before any
// criticality is touched.
const farAbove = 2.0

// planSlots is the size of the published per-tenant table (open
// addressing); at most planSlots/2 tenants are listed.
const planSlots = 64

// plan is what Step publishes for the accept path while shedding: per rank
// (levee.Criticality.Rank), the share of requests to reject, for everyone
// and for the few tenants listed. It is immutable once published except for
// the counters that spread the fractions.
type plan struct {
	// budget, when budgetRank ≥ 0, is how many more requests of that rank
	// from unlisted tenants may be admitted until the next Step: a count
	// rather than a fraction, so that admissions follow the aim whatever
	// the arrivals do within the period.
	budget     atomic.Int64
	budgetRank int
	until      int64 // the plan is not applied after this (the controller's scale)
	all        [levee.NumCriticalities]bool
	thr        [levee.NumCriticalities]uint64 // reject if weyl(n) < thr
	hasTenants bool
	tenants    [planSlots]planTenant
}

type planTenant struct {
	key uint64
	all [levee.NumCriticalities]bool
	thr [levee.NumCriticalities]uint64
	ctr [levee.NumCriticalities]atomic.Uint64
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

// shed reports whether the request of rank r, tenant key (0 = none) and
// class counter n is rejected.
func (p *plan) shed(key uint64, r int, n, off uint64) bool {
	if p.hasTenants && key != 0 {
		i := key >> 58
		for k := uint64(0); k < planSlots; k++ {
			e := &p.tenants[(i+k)&(planSlots-1)]
			if e.key == key {
				if e.all[r] {
					return true
				}
				return weyl(e.ctr[r].Add(1), off) < e.thr[r]
			}
			if e.key == 0 {
				break
			}
		}
	}
	if r == p.budgetRank {
		return p.budget.Add(-1) < 0
	}
	return p.all[r] || weyl(n, off) < p.thr[r]
}

// startTenants starts every listed tenant's sequences at n.
func (p *plan) startTenants(n uint64) {
	for i := range p.tenants {
		if p.tenants[i].key != 0 {
			for r := range p.tenants[i].ctr {
				p.tenants[i].ctr[r].Store(n)
			}
		}
	}
}

// planInput is what the ladder needs, all rates in requests per second.
type planInput struct {
	shed    float64                         // rate to shed
	rate    [levee.NumCriticalities]float64 // eligible arrivals per rank
	tenants []fairq.Tenant                  // heavy hitters, heaviest first; Rate indexed by Criticality
	fair    float64                         // fair share per tenant, 0 = no tenant stage
	period  float64                         // seconds until the next plan; 0 = fractions only
	slack   float64                         // shed rate a fully shed boundary may leave unshed
}

// planResult is the plan plus what Snapshot reports.
type planResult struct {
	p          *plan
	level      float64 // ShedLevel: full ranks + fraction of the partial one
	tenantShed float64 // rate shed from tenants far above their share
	listed     int
	snapped    bool // the plan holds a level boundary, leaving up to slack unshed
}

// buildPlan maps a shed rate onto the order of sacrifice: first the excess
// of tenants far above their fair share (heaviest first, each tenant's own
// lowest criticalities first), then the ladder over ranks, a rank touched
// only when every lower one is fully shed; inside the partly shed rank,
// tenants above their fair share first.
func buildPlan(in planInput) planResult {
	var res planResult
	if !(in.shed > 0) {
		return res
	}
	p := &plan{budgetRank: -1}
	res.p = p
	n := len(in.tenants)
	if n > planSlots/2 {
		n = planSlots / 2
	}
	type trank struct {
		rate [levee.NumCriticalities]float64 // by rank
		tot  float64
		ts   [levee.NumCriticalities]float64 // tenant-stage shed by rank
	}
	ts := make([]trank, n)
	for i := range n {
		for c := range levee.NumCriticalities {
			r := levee.Criticality(c).Rank()
			v := max(0, in.tenants[i].Rate[c])
			v = min(v, in.rate[r]) // a sampled estimate cannot exceed the total
			ts[i].rate[r] = v
			ts[i].tot += v
		}
	}
	S := in.shed

	// Stage 1: excess of tenants far above their fair share.
	if in.fair > 0 {
		floor := farAbove * in.fair
		var excess float64
		var ab []int
		for i := range ts {
			if ts[i].tot > floor {
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
					ts[i].ts[r] = take
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
			rest[r] -= ts[i].ts[r]
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
	if full < levee.NumCriticalities && S > 1e-9 && rest[full] > 0 {
		partial = full
		res.level = float64(full) + S/rest[full]
		var H float64
		for i := range ts {
			if ts[i].tot > in.fair && in.fair > 0 {
				H += max(0, ts[i].rate[partial]-ts[i].ts[partial])
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
		p.all[partial], p.thr[partial] = fracThr(fO)
		if in.period > 0 && fO < 1 {
			// Unlisted tenants' admissions in the partial rank as a count.
			var listed float64
			for i := range ts {
				listed += max(0, ts[i].rate[partial]-ts[i].ts[partial])
			}
			others := max(0, rest[partial]-listed)
			p.budgetRank = partial
			p.budget.Store(int64(math.Round(others * (1 - fO) * in.period)))
		}
	} else {
		res.level = float64(full)
	}

	// Per-tenant entries where they differ from everyone else's.
	for i := range ts {
		var e planTenant
		differs := false
		for r := range levee.NumCriticalities {
			t := 0.0
			if ts[i].rate[r] > 0 {
				t = ts[i].ts[r] / ts[i].rate[r]
			}
			l := 0.0
			switch {
			case r < full:
				l = 1
			case r == partial && in.fair > 0 && ts[i].tot > in.fair:
				l = fH
			case r == partial:
				l = fO
			}
			f := 1 - (1-t)*(1-l)
			if t > 0 || (r == partial && l != fO) {
				differs = true
			}
			e.all[r], e.thr[r] = fracThr(f)
		}
		if !differs {
			continue
		}
		key := in.tenants[i].Key
		for k := uint64(0); k < planSlots; k++ {
			s := &p.tenants[(key>>58+k)&(planSlots-1)]
			if s.key == 0 {
				s.key, s.all, s.thr = key, e.all, e.thr
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
