package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/fairq"
	"github.com/levee-dev/levee/internal/smooth"
)

// tenants is the plan stage's tenant accounting: it drains the accept
// path's samples into a bounded heavy-hitter tracker, adapts the sampling
// ratio, groups the tenants of one network, and turns the shed rate into a
// plan over tenants and the ladder.
//
// What the tenant stage books is what it can really shed:
//
//   - A tenant (or group) is cut only on evidence: its rate's lower
//     bound (three standard deviations of its sample count below it) is
//     far above the fair share. With thousands of tenants and a fair share
//     of a fraction of a request a period, a sampled small tenant looks
//     far above it by chance; it is left to the ladder, which sheds by
//     counts whatever the number of tenants.
//   - Once listed, a tenant's requests are counted exactly by its plan
//     entry, and the next plan uses those counts instead of samples: a
//     tenant that stopped sending is booked at what it sends, and the
//     ladder gets the rest at the next Step.
//   - Its cut is admitted up to a budget of requests, not a fraction, and
//     an unused fraction of a request carries to the next plan, so that a
//     cut down to less than a request a period still admits its share.
//   - What the tenant stage rejected is measured (Snapshot.TenantShedRPS).
//   - One tenant alone (every caller behind one address) is paced too
//     when far above its share, which is then the whole aim: the pace
//     refuses a batch a saturated process reads at once, where the
//     ladder's share would admit its part to queue behind the work
//     already admitted (TestOneTenantBatchPaced, with what the demo
//     measured without it).
//
// Groups (hierarchical heavy hitters): an untrusted caller's tenant is its
// address's /64 (IPv6) or /24 (IPv4), and levee.Call.Peer carries the
// address. An IPv6 /48 (one site) counts as one tenant when its tenants
// together send more than the fair share computed with it counted as one:
// a Sybil spread over thousands of /64s no longer shrinks everyone's fair
// share, and is cut as one tenant. A tenant of a group that is by itself
// far above the fair share stays its own entry; the group's entry holds
// the rest. The prefixes of an ISP's allocation (IPv6 /32, IPv4 /16) are
// grouped only when WithPeerGroups says so: their honest customers,
// thousands of small tenants, would otherwise be one tenant.
type tenants struct {
	tracker *fairq.Tracker
	groups  PeerGroups
	leaves  []fairq.Tenant // reused between periods
	pre     [fairq.NumLevels][]fairq.Tenant
	far     []unit
	heavy   []unit
	grouped map[uint64]bool
	exact   map[uint64]*exactShare
	// Measured, for the report.
	cutRate float64 // tenant-stage rejections per second, last period
	units   float64 // tenants as grouped
	nGroups int
}

// exactShare is a listed tenant's share of all eligible arrivals, per
// rank, from its plan entry's exact counts. A share rather than a rate:
// multiplied by the smoothed arrival rate the ladder works with, it adds
// up with the others exactly (with one tenant, to all of it), where its
// own noisy rate would leave a phantom remainder to "other tenants".
type exactShare struct {
	share [levee.NumCriticalities]float64
	n     float64 // requests behind the last reading
	seen  bool
}

func newTenants(groups PeerGroups) tenants {
	return tenants{
		tracker: fairq.NewTracker(0),
		groups:  groups,
		grouped: make(map[uint64]bool),
		exact:   make(map[uint64]*exactShare),
	}
}

// observe closes a period of dt (ns) at now (ns): the samples taken at
// weight 2^shift go into the tracker, and the returned shift keeps the
// ring below ringTarget samples a period at perPeriod arrivals a period.
func (t *tenants) observe(ring *fairq.Ring, shift uint32, now, dt int64, perPeriod float64) uint32 {
	weight := float64(uint64(1) << shift)
	ring.Drain(func(v uint64) { t.tracker.Add(v, weight) })
	t.tracker.Step(time.Unix(0, now), time.Duration(dt))
	ns := uint32(0)
	for ns < 40 && perPeriod/float64(uint64(1)<<ns) > ringTarget {
		ns++
	}
	return ns
}

// measure reads the exact counts of the tenants listed in the previous
// plan (its entries count every request they judged) over the dt it was
// in force, in which eligible requests arrived in all: their
// shares for the next plan, and the tenant stage's real shed rate.
func (t *tenants) measure(prev *plan, dt time.Duration, eligible float64) {
	sec := dt.Seconds()
	t.cutRate = 0
	for _, x := range t.exact {
		x.seen = false
	}
	if prev != nil && prev.hasTenants && sec > 0 && eligible > 0 {
		a := smooth.Alpha(dt, 500*time.Millisecond) // the tracker's smoothing
		for i := range prev.tenants {
			e := &prev.tenants[i]
			if e.key == 0 {
				continue
			}
			t.cutRate += float64(e.cut.Load()) / sec
			var got [levee.NumCriticalities]float64
			var n float64
			for r := range got {
				c := float64(e.ctr[r].Load() - e.start)
				got[r] = min(1, c/eligible)
				n += c
			}
			x := t.exact[e.key]
			if x == nil {
				t.exact[e.key] = &exactShare{share: got, n: n, seen: true}
				continue
			}
			// A jump (×2 on 32 requests or more) is taken at once, as the
			// tracker takes it.
			jump := max(n, x.n) >= 32 && (n > 2*x.n || 2*n < x.n)
			for r := range x.share {
				if jump {
					x.share[r] = got[r]
				} else {
					x.share[r] = smooth.Toward(x.share[r], got[r], a)
				}
			}
			x.n, x.seen = n, true
		}
	}
	for k, x := range t.exact {
		if !x.seen {
			delete(t.exact, k)
		}
	}
}

// planIn is the plan stage's input for one period.
type planIn struct {
	shed     float64                         // rate to shed
	R        float64                         // eligible arrival rate
	mix      [levee.NumCriticalities]float64 // R split between ranks
	capacity float64                         // divided among the active tenants
	aim      float64                         // admitted-rate aim (for the boundary slack)
	period   float64                         // seconds the plan's budgets must last
	arrived  uint64                          // arrivals counted so far (the tenants' sequences start here)
	floor    float64                         // forced shed level, 0 = none
	drain    float64                         // rate to shed besides shed, for a backlog
}

// evidence is the number of standard deviations a tenant's rate must
// stand above a threshold, its sample count giving the deviation.
const evidence = 3.0

// lowerBound returns the rate tot less evidence standard deviations of
// samples Poisson samples (0 when that is all of it).
func lowerBound(tot, samples float64) float64 {
	if samples <= evidence*evidence {
		return 0
	}
	return tot * (1 - evidence/math.Sqrt(samples))
}

// toUnit converts a tracker entry (rates by criticality, in sampled
// weight) to a unit (rates by rank, per second), scaled by k, or, if it
// was listed, its exact share of R.
func (t *tenants) toUnit(e *fairq.Tenant, k, R float64) (u unit, exact bool) {
	u.key = e.Key
	if x := t.exact[e.Key]; x != nil {
		for r, v := range x.share {
			u.rate[r] = v * R
		}
		return u, true
	}
	for c := range levee.NumCriticalities {
		u.rate[levee.Criticality(c).Rank()] = e.Rate[c] * k
	}
	return u, false
}

// plan maps the shed rate onto tenants and the ladder and returns the plan
// and the fair share it used.
func (t *tenants) plan(in planIn) (res planResult, fair float64) {
	var sampled float64
	for _, v := range t.tracker.All() {
		sampled += v
	}
	// A tenant's sampled rate is noisy, and its errors do not cancel in
	// the plan: an overestimate is clipped to the arrival rate, an
	// underestimate leaves a phantom share to "other tenants" that
	// nobody uses. Its share of all samples, smoothed alike, has no such
	// error: scale the rates by it.
	k := 1.0
	if sampled > 0 {
		k = in.R / sampled
	}
	fair = t.group(in.capacity, k)
	if !(in.shed > 0) && !(in.floor > 0) && !(in.drain > 0) {
		return res, fair
	}

	// Units: tenants by themselves, and grouped prefixes with what their
	// tenants not listed by themselves send.
	floor := farAbove * fair
	t.far, t.heavy = t.far[:0], t.heavy[:0]
	t.leaves = t.tracker.Top(t.leaves[:0], 0)
	var inGroup [fairq.NumLevels][]float64 // per grouped prefix: rate of its own-unit tenants
	for l := range inGroup {
		inGroup[l] = make([]float64, len(t.pre[l]))
	}
	for i := range t.leaves {
		e := &t.leaves[i]
		u, exact := t.toUnit(e, k, in.R)
		tot := u.total()
		g := t.groupOf(e)
		if g >= 0 && tot <= floor {
			continue // part of its group
		}
		if g >= 0 {
			l, j := g>>16, g&0xFFFF
			inGroup[l][j] += tot
		}
		t.classify(u, tot, e.Samples, exact, fair)
	}
	for l := range t.pre {
		for j := range t.pre[l] {
			e := &t.pre[l][j]
			if !t.grouped[e.Key] {
				continue
			}
			u, exact := t.toUnit(e, k, in.R)
			if !exact {
				// The group's own entry: what its tenants not listed by
				// themselves send.
				f := max(0, 1-inGroup[l][j]/max(u.total(), 1e-9))
				for r := range u.rate {
					u.rate[r] *= f
				}
			}
			t.classify(u, u.total(), e.Samples, exact, fair)
		}
	}
	sortUnits(t.far)
	sortUnits(t.heavy)

	res = buildPlan(planInput{shed: in.shed, rate: in.mix, units: t.far, heavy: t.heavy, fair: fair,
		period: in.period, slack: boundarySlack * in.aim, floor: in.floor, drain: in.drain})
	if res.p != nil && res.p.hasTenants {
		// Each plan continues the listed tenants' sequences where the
		// arrivals have got to: restarting them at 0 every period would
		// replay the same first few hundred points of the Weyl sequence,
		// whose error at a small admitted share (a few requests a period)
		// then repeats every period instead of averaging out.
		res.p.startTenants(in.arrived)
	}
	return res, fair
}

// classify files a unit as far above the fair share, above it, or
// neither, on evidence: exact counts, or a sampled rate whose lower bound
// clears the threshold.
func (t *tenants) classify(u unit, tot, samples float64, exact bool, fair float64) {
	sure := func(thr float64) bool { return tot > thr && (exact || lowerBound(tot, samples) > thr) }
	switch {
	case fair > 0 && sure(farAbove*fair):
		t.far = append(t.far, u)
	case fair > 0 && sure(fair):
		t.heavy = append(t.heavy, u)
	}
}

// groupOf returns the grouped prefix a tenant belongs to, as level<<16 |
// index into t.pre[level], or -1.
func (t *tenants) groupOf(e *fairq.Tenant) int {
	for l := fairq.NumLevels - 1; l >= 0; l-- { // the coarsest group holds it all
		p := e.Parent[l]
		if p == 0 || !t.grouped[p] {
			continue
		}
		for j := range t.pre[l] {
			if t.pre[l][j].Key == p {
				return l<<16 | j
			}
		}
	}
	return -1
}

// group decides which prefixes count as one tenant and returns the fair
// share: capacity ÷ the active tenants as grouped. A prefix is grouped
// when its tenants together send more than the fair share computed with
// it counted as one; heaviest first, sites (level 1) first, then, when
// enabled, ISP prefixes (level 2), which subsume the sites under them.
func (t *tenants) group(capacity, k float64) float64 {
	clear(t.grouped)
	units := t.active()
	for l := range t.pre {
		t.pre[l] = t.pre[l][:0]
		if l == 1 && t.groups&GroupIPv6ISP == 0 {
			continue
		}
		t.pre[l] = t.tracker.Prefixes(t.pre[l], l+1, 0)
		for j := range t.pre[l] {
			e := &t.pre[l][j]
			members := max(1, e.Children)
			if l == 1 { // grouped sites under it are one tenant each already
				for _, s := range t.pre[0] {
					if s.Parent[1] == e.Key && t.grouped[s.Key] {
						members -= max(1, s.Children) - 1
					}
				}
				members = max(1, members)
			}
			u := max(1, units-(members-1))
			// One tenant under a prefix is that tenant: nothing to group.
			if members < 1.5 || !(capacity > 0 && e.Total()*k > capacity/u) {
				continue
			}
			t.grouped[e.Key] = true
			units = u
			if l == 1 {
				for _, s := range t.pre[0] {
					if s.Parent[1] == e.Key {
						delete(t.grouped, s.Key)
					}
				}
			}
		}
	}
	t.nGroups = len(t.grouped)
	if t.nGroups > 0 {
		// units subtracts estimates of the groups' tenants from one of all
		// tenants; when the groups are most of them the difference is
		// mostly error. The tenants outside groups that the heavy-hitter
		// table holds on evidence, plus one per group, bound it from
		// below.
		t.leaves = t.tracker.Top(t.leaves[:0], 0)
		seen := float64(t.nGroups)
		for i := range t.leaves {
			if t.leaves[i].Samples >= evidence*evidence && t.groupOf(&t.leaves[i]) < 0 {
				seen++
			}
		}
		units = max(units, seen)
	}
	t.units = units
	return capacity / units
}

// active returns the estimated number of active tenants, at least 1.
func (t *tenants) active() float64 { return max(1, t.tracker.Active()) }

// sortUnits sorts heaviest first, ties by key (deterministic).
func sortUnits(us []unit) {
	for i := 1; i < len(us); i++ {
		for j := i; j > 0; j-- {
			a, b := us[j].total(), us[j-1].total()
			if a < b || a == b && us[j].key > us[j-1].key {
				break
			}
			us[j], us[j-1] = us[j-1], us[j]
		}
	}
}
