package fleet

import (
	"context"
	"log/slog"
	"math"
	"time"
)

// Round is one period's exchange with the store: this instance's claims,
// one per tenant it serves, and the store's grants. BeginRound makes it,
// a Store fills Grants and Live, FinishRound applies it. Run does all
// three with real time; a simulator calls them on virtual time.
type Round struct {
	// Instance is this instance's id; TTL how long its entries live in
	// the store without renewal.
	Instance string
	TTL      time.Duration
	// Claims lists the tenants this instance reports, the default pool
	// first when it has a quota.
	Claims []Claim
	// Grants is filled by the store: one per claim, in the same order.
	Grants []Grant
	// Live is filled by the store: the instances that exchanged within TTL,
	// this one included.
	Live int

	sent    time.Time
	entries []*entry
}

// Claim is one instance's report for one tenant. Rates are in cores.
type Claim struct {
	// Tenant names the tenant; Default marks the default pool (Tenant "").
	Tenant  string
	Default bool
	// Quota is the fleet quota in this instance's Config.
	Quota float64
	// Wants is this instance's demand: its measured usage plus the
	// estimated cost of the requests it refused.
	Wants float64
	// Target is the lease this instance asks for (see the package
	// documentation); the store grants at most what the others leave free.
	Target float64
	// Usage is what the tenant used on this instance in the last period.
	Usage float64
	// Release says this instance has stopped serving the tenant: the store
	// drops its entry and grants nothing.
	Release bool
}

// Grant is the store's answer to a Claim, read at the store after this
// instance's update. Rates are in cores.
type Grant struct {
	// Has is this instance's lease: min(Target, Quota − the others' leases),
	// never negative.
	Has float64
	// SumWants, SumHas and SumUsage add up Wants, Has and Usage over the
	// live instances serving the tenant; Instances counts them.
	SumWants, SumHas, SumUsage float64
	Instances                  int
}

// idleRounds is how many rounds without a request a tenant stays claimed
// on an instance before the instance releases its lease.
const idleRounds = 10

// Demand smoothing: the weight of a round's demand is its requests ÷
// demandRequests, within [minDemandWeight, 0.5].
const (
	demandRequests  = 50
	minDemandWeight = 0.05
)

// minTolRequests is the least burst, in requests of the tenant's cost,
// an instance tolerates whatever its lease: a lease smaller than one
// request per burst would refuse a tenant that is under its quota
// whenever two of its requests come close together. The debt it allows
// is paid back at the lease, so the rate holds.
const minTolRequests = 1

// maxDebt bounds how far ahead of now a bucket's theoretical arrival time
// may run beyond its burst: a wall-clock step backwards, or one huge
// measured cost, blocks a tenant for at most this long. It is as long as
// the longest charge of one request, so that no real debt is forgiven.
const maxDebt = int64(time.Hour)

// tenantRound is one tenant's bookkeeping between rounds (under
// Limiter.mu).
type tenantRound struct {
	quota     float64 // cores, as last published
	lease     float64 // cores granted by the store
	leased    bool    // lease is valid until until
	until     time.Time
	published float64 // lease in force in Allow (0: none)
	estUsed   float64 // cost per request charged by Allow, core-seconds
	est       float64 // measured cost per request, smoothed; 0 unknown
	wants     float64 // smoothed demand, cores
	sent      float64 // Wants of the last granted claim
	view      Grant
	haveView  bool
	claimed   bool
	idle      int
	debt      float64 // core-seconds owed while without a lease
	usage     float64 // cores, last round
	admRate   float64 // admitted per second, last round
	rejRate   float64
	admitted  uint64 // cumulative
	rejected  uint64
	cost      float64 // cumulative core-seconds
	routes    map[string]*RouteStats
}

// roundState is the Limiter's bookkeeping between rounds (under mu).
type roundState struct {
	last      time.Time
	rounds    uint64
	lastCPU   time.Duration
	haveCPU   bool
	cpuErr    error
	ratio     float64 // core-seconds per handler wall-second, last round
	live      int
	storeOK   bool
	everOK    bool
	fallback  bool
	lastOK    time.Time
	errors    uint64
	lastErr   error
	exchanges uint64
	exchDur   time.Duration
	cpuTotal  float64 // core-seconds metered
	buf       []drained
}

// BeginRound closes the metering period ending at now and returns the
// claims to send to the store. Each tenant's measured cost replaces the
// estimate Allow charged during the period (the difference is charged or
// refunded), and its demand is updated. Rounds must be finished in the
// order they began.
func (l *Limiter) BeginRound(now time.Time) *Round {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := &l.rs
	dt := l.opts.period.Seconds()
	if rs.rounds > 0 {
		if d := now.Sub(rs.last).Seconds(); d > 0 {
			dt = d
		}
	}
	rs.last = now
	rs.rounds++
	t := l.table.Load()

	// Drain every meter, then divide the CPU of the period among the
	// requests in proportion to their wall time.
	rs.buf = rs.buf[:0]
	bounds := make([]int, len(t.all)+1)
	var wall, given int64
	for i, e := range t.all {
		bounds[i] = len(rs.buf)
		rs.buf = e.st.drain(rs.buf)
		for _, d := range rs.buf[bounds[i]:] {
			wall += d.wall
			given += d.cost
		}
	}
	bounds[len(t.all)] = len(rs.buf)
	ratio := l.costRatio(wall, given)

	var sumCost float64
	var sumN int64
	for i, e := range t.all {
		cost, n := e.st.r.meter(rs.buf[bounds[i]:bounds[i+1]], ratio)
		sumCost += cost
		sumN += n
		l.account(e, cost, n, dt, now)
	}
	rs.cpuTotal += sumCost
	if sumN > 0 {
		l.avgCost.Store(math.Float64bits(math.Max(sumCost/float64(sumN), 1e-9)))
	}

	r := &Round{Instance: l.opts.instance, TTL: l.opts.ttl, Live: rs.live, sent: now}
	for _, e := range t.all {
		if c, ok := l.claim(e); ok {
			r.Claims = append(r.Claims, c)
			r.entries = append(r.entries, e)
		}
	}
	return r
}

// costRatio reads the process's CPU time and returns the core-seconds
// each second of handler wall time cost in the period: (CPU − the costs
// given by callers) ÷ wall. Without a CPU reader, or before its second
// reading, or with no wall time metered, the previous ratio stands (1 at
// first).
func (l *Limiter) costRatio(wall, given int64) float64 {
	rs := &l.rs
	if rs.ratio == 0 {
		rs.ratio = 1
	}
	if l.opts.cpu == nil {
		rs.ratio = 0
		return 0
	}
	cpu, err := l.opts.cpu()
	if err != nil {
		rs.cpuErr = err
		return rs.ratio
	}
	rs.cpuErr = nil
	d := cpu - rs.lastCPU
	had := rs.haveCPU
	rs.lastCPU, rs.haveCPU = cpu, true
	if !had || wall <= 0 || d < 0 {
		return rs.ratio
	}
	rs.ratio = math.Min(math.Max(float64(d-time.Duration(given)), 0)/float64(wall), 1e3)
	l.ratio.Store(math.Float64bits(rs.ratio))
	return rs.ratio
}

// meter adds the drained meters of one tenant to its per-route totals
// and returns its cost in the period (core-seconds) and its requests.
func (r *tenantRound) meter(ds []drained, ratio float64) (cost float64, n int64) {
	for _, d := range ds {
		c := (float64(d.wall)*ratio + float64(d.cost)) / 1e9
		cost += c
		n += d.n
		if r.routes == nil {
			r.routes = map[string]*RouteStats{}
		}
		rt := r.routes[d.name]
		if rt == nil {
			rt = &RouteStats{Route: d.name}
			r.routes[d.name] = rt
		}
		rt.Requests += uint64(d.n)
		rt.CostCoreSeconds += c
		rt.WallSeconds += float64(d.wall) / 1e9
	}
	return cost, n
}

// account settles one tenant's period: the measured cost replaces the
// estimate Allow charged, the demand and the cost per request are updated.
func (l *Limiter) account(e *entry, cost float64, n int64, dt float64, now time.Time) {
	st, r := e.st, &e.st.r
	adm, rej := st.admitted.Swap(0), st.rejected.Swap(0)
	r.admitted += uint64(adm)
	r.rejected += uint64(rej)
	r.cost += cost
	r.usage = cost / dt
	r.admRate, r.rejRate = float64(adm)/dt, float64(rej)/dt
	if n > 0 {
		per := cost / float64(n)
		if r.est == 0 {
			r.est = per
		} else {
			r.est += 0.5 * (per - r.est)
		}
	}
	if e.quota.Cores > 0 {
		l.charge(e, cost-float64(adm)*r.estUsed, now)
	}
	est := r.est
	if est == 0 {
		est = math.Float64frombits(l.avgCost.Load())
	}
	// Demand is smoothed over about demandRequests requests (at least a
	// round, at most 1/minDemandWeight rounds): a tenant seen once a
	// minute on this instance must not ask for its whole quota the round
	// it is seen.
	demand := r.usage + float64(rej)*est/dt
	w := min(max(float64(adm+rej+n)/demandRequests, minDemandWeight), 0.5)
	if r.wants == 0 && demand > 0 && adm+rej+n >= demandRequests {
		w = 1
	}
	r.wants += w * (demand - r.wants)
	if adm+rej+n == 0 {
		r.idle++
	} else {
		r.idle = 0
	}
}

// charge adds cost core-seconds (a refund if negative) to the tenant's
// bucket at its lease in force.
func (l *Limiter) charge(e *entry, cost float64, now time.Time) {
	st, r := e.st, &e.st.r
	if r.published <= 0 {
		r.debt += cost
		return
	}
	shift(st, int64(cost/r.published*1e9), now.UnixNano(), e.tau[0])
}

// shift moves the bucket's theoretical arrival time by d ns, never below
// now (a refund does not bank more than a full bucket) nor beyond the
// burst plus maxDebt.
func shift(st *tenantState, d, now, tau int64) {
	for {
		old := st.tat.Load()
		nt := min(max(max(old, now)+d, now), now+tau+maxDebt)
		if nt == old || st.tat.CompareAndSwap(old, nt) {
			return
		}
	}
}

// claim returns the tenant's claim for this round, if it has one: a
// tenant is claimed while it had requests in the last idleRounds rounds,
// and released once after.
func (l *Limiter) claim(e *entry) (Claim, bool) {
	r := &e.st.r
	q := e.quota.Cores
	if q == 0 {
		return Claim{}, false
	}
	c := Claim{Tenant: e.st.name, Default: e.st.def, Quota: q, Usage: r.usage}
	if r.idle >= idleRounds {
		if !r.claimed {
			return Claim{}, false
		}
		c.Release = true
		return c, true
	}
	c.Wants = r.wants
	sumW, n := r.wants, l.rs.live
	if r.haveView {
		sumW, n = r.view.SumWants+r.wants, r.view.Instances
		if r.claimed {
			sumW -= r.sent
		} else {
			n++
		}
	}
	c.Target = target(q, r.wants, sumW, n)
	if !r.claimed {
		// A first claim (the tenant new here, or back after an idle
		// spell) knows the others' demand only from an old view or not
		// at all: it asks for no more than the local share it enforced
		// until now, so that when the tenant starts on every instance at
		// once the first to exchange cannot take what the last needs.
		c.Target = math.Min(c.Target, q/float64(max(1, l.rs.live)))
	}
	return c, true
}

// FinishRound applies the store's answer to r (err nil) or its failure at
// now: the leases granted, the number of live instances; leases past
// their validity (0.9 TTL after the last exchange that renewed them) fall
// back to the local share, quota ÷ live instances as last known. It then
// publishes every tenant's rate to Allow.
func (l *Limiter) FinishRound(now time.Time, r *Round, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := &l.rs
	if err == nil && len(r.Grants) < len(r.Claims) {
		err = errNoGrant
	}
	rs.exchanges++
	rs.exchDur = now.Sub(r.sent)
	if err == nil {
		if !rs.storeOK {
			// Said also when the store answers for the first time after
			// failed exchanges: their failure (and fallback) was logged.
			l.log(slog.LevelInfo, "fleet: store reachable again", "after_errors", rs.errors)
		}
		rs.storeOK, rs.everOK, rs.lastOK = true, true, r.sent
		rs.live = max(1, r.Live)
		until := r.sent.Add(l.opts.ttl * 9 / 10)
		for i, e := range r.entries {
			tr, c, g := &e.st.r, r.Claims[i], r.Grants[i]
			if c.Release {
				tr.claimed, tr.leased = false, false
				continue
			}
			tr.claimed, tr.leased, tr.until = true, true, until
			tr.lease, tr.sent, tr.view, tr.haveView = g.Has, c.Wants, g, true
		}
	} else {
		rs.errors++
		rs.lastErr = err
		if rs.storeOK {
			l.log(slog.LevelWarn, "fleet: exchange with the store failed; leases kept until they expire", "err", err)
		}
		rs.storeOK = false
	}
	t := l.table.Load()
	expired := 0
	for _, e := range t.all {
		tr := &e.st.r
		if tr.leased && !now.Before(tr.until) {
			tr.leased, tr.claimed = false, false
			expired++
		}
		l.publish(e, now)
	}
	fallback := !rs.storeOK && (!rs.everOK || now.Sub(rs.lastOK) >= l.opts.ttl*9/10)
	if fallback && !rs.fallback {
		l.log(slog.LevelWarn, "fleet: store unreachable; each tenant limited to its local share (quota ÷ live instances)",
			"live_instances", rs.live, "leases_expired", expired, "err", rs.lastErr)
	}
	rs.fallback = fallback
}

// publish sets the rate Allow applies to the tenant: its lease while
// valid, else its local share (see localShare).
func (l *Limiter) publish(e *entry, now time.Time) {
	st, r := e.st, &e.st.r
	q := e.quota.Cores
	r.quota = q
	if q == 0 {
		st.inc.Store(0)
		r.published = 0
		return
	}
	lease := l.localShare(r, q)
	if r.leased {
		lease = math.Min(r.lease, q)
	}
	n := now.UnixNano()
	if old := r.published; old > 0 && lease >= minLease && old != lease {
		// The debt within the burst tolerance is kept in time (a full
		// bucket stays full: a larger lease releases no burst); the debt
		// beyond it is kept in cost, so that what a tiny lease ran up is
		// not multiplied when the lease grows.
		if d := st.tat.Load() - n; d > e.tau[0] {
			excess := d - e.tau[0]
			shift(st, int64(float64(excess)*old/lease)-excess, n, e.tau[0])
		}
	}
	if lease < minLease {
		st.inc.Store(-1)
		r.published = 0
		return
	}
	if r.debt != 0 {
		shift(st, int64(r.debt/lease*1e9), n, e.tau[0])
		r.debt = 0
	}
	est := r.est
	if est == 0 {
		est = math.Float64frombits(l.avgCost.Load())
	}
	r.estUsed = est
	inc := min(max(int64(est/lease*1e9), 1), int64(time.Hour))
	st.inc.Store(inc)
	st.minTol.Store(minTolRequests * inc)
	r.published = lease
}

// localShare is the rate of a tenant this instance holds no lease for:
// while the store answers and the tenant's leases are known, the part of
// the quota the leases leave free, spread over the live instances that
// hold none; otherwise (the store lost, or the tenant never claimed
// here) quota ÷ live instances.
func (l *Limiter) localShare(r *tenantRound, q float64) float64 {
	live := max(1, l.rs.live)
	if !l.rs.storeOK || !r.haveView {
		return q / float64(live)
	}
	free := math.Max(q-r.view.SumHas, 0)
	return math.Min(free/float64(max(1, live-r.view.Instances)), q/float64(live))
}

// minLease is the smallest lease Allow enforces as a rate: a micro-core,
// the store's unit; below it the tenant has no lease on this instance.
const minLease = 1 / micro

func (l *Limiter) log(level slog.Level, msg string, args ...any) {
	if l.opts.logger != nil {
		l.opts.logger.Log(context.Background(), level, msg, append([]any{"instance", l.opts.instance}, args...)...)
	}
}
