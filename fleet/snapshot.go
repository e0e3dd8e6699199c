package fleet

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Snapshot is a Limiter's state, for metrics, status pages and tests.
// Rates are in cores (core-seconds per second) and requests per second,
// over the last round; counters are cumulative since New.
type Snapshot struct {
	// Instance is this instance's id; Rounds the rounds begun.
	Instance string
	Rounds   uint64
	// StoreOK reports whether the last exchange with the store succeeded;
	// Fallback whether the leases have expired for want of the store, so
	// that every tenant is held to its local share.
	StoreOK, Fallback bool
	// StoreErrors counts failed exchanges; LastError is the last one's
	// message ("" if none).
	StoreErrors uint64
	LastError   string
	// LastExchange is when the last successful exchange was sent (zero if
	// none); ExchangeSeconds how long the last exchange took.
	LastExchange    time.Time
	ExchangeSeconds float64
	// LiveInstances is the number of instances the store last counted (or
	// WithInitialInstances before it answered).
	LiveInstances int
	// CostPerWallSecond is the last round's CPU per second of handler wall
	// time; CPUSeconds the core-seconds metered so far.
	CostPerWallSecond float64
	CPUSeconds        float64
	// Tenants holds the default pool first (Default true, Name ""), then
	// the listed tenants by name.
	Tenants []TenantSnapshot
}

// LeaseState says where a tenant's rate on this instance comes from.
type LeaseState uint8

// Lease states.
const (
	// Unlimited: no quota applies (the default pool without one).
	Unlimited LeaseState = iota
	// Leased: a lease granted by the store and still valid.
	Leased
	// Local: the local share, quota ÷ live instances: before the first
	// exchange, for a tenant this instance has not claimed (idle here),
	// or after the lease expired for want of the store.
	Local
)

var leaseNames = [...]string{"unlimited", "leased", "local"}

// String returns "unlimited", "leased" or "local".
func (s LeaseState) String() string {
	if int(s) < len(leaseNames) {
		return leaseNames[s]
	}
	return "unknown"
}

// TenantSnapshot is one tenant's (or the default pool's) state on this
// instance.
type TenantSnapshot struct {
	Name    string
	Default bool
	// QuotaCores is the fleet quota; LeaseCores the rate Allow enforces
	// here (0 with no lease, or unlimited); State where it comes from.
	QuotaCores, LeaseCores float64
	State                  LeaseState
	// UsageCores is the measured cost per second here, last round;
	// DemandCores the smoothed demand (usage plus the estimated cost of
	// the refused requests); FleetUsageCores and FleetDemandCores the
	// fleet's sums as the store last reported them; FleetInstances the
	// instances serving the tenant then.
	UsageCores, DemandCores           float64
	FleetUsageCores, FleetDemandCores float64
	FleetInstances                    int
	// CostPerRequest is the smoothed measured cost of one request, in
	// core-seconds (0 before the first measurement).
	CostPerRequest float64
	// AdmittedRPS and RejectedRPS are Allow's answers per second, last
	// round; Admitted and Rejected count them.
	AdmittedRPS, RejectedRPS float64
	Admitted, Rejected       uint64
	// CostCoreSeconds is the tenant's cost metered here so far.
	CostCoreSeconds float64
	// Routes holds the tenant's metered routes, by name.
	Routes []RouteStats
}

// RouteStats is one route's metering for one tenant, cumulative.
type RouteStats struct {
	Route           string
	Requests        uint64
	CostCoreSeconds float64
	WallSeconds     float64
}

// Snapshot returns the Limiter's state at the last round.
func (l *Limiter) Snapshot() Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	rs := &l.rs
	s := Snapshot{
		Instance: l.opts.instance, Rounds: rs.rounds,
		StoreOK: rs.storeOK && rs.everOK, Fallback: rs.fallback,
		StoreErrors: rs.errors, LastExchange: rs.lastOK, ExchangeSeconds: rs.exchDur.Seconds(),
		LiveInstances: rs.live, CostPerWallSecond: rs.ratio, CPUSeconds: rs.cpuTotal,
	}
	if rs.lastErr != nil {
		s.LastError = rs.lastErr.Error()
	}
	for _, e := range l.table.Load().all {
		r := &e.st.r
		ts := TenantSnapshot{
			Name: e.st.name, Default: e.st.def, QuotaCores: e.quota.Cores, LeaseCores: r.published,
			UsageCores: r.usage, DemandCores: r.wants, CostPerRequest: r.est,
			AdmittedRPS: r.admRate, RejectedRPS: r.rejRate, Admitted: r.admitted, Rejected: r.rejected,
			CostCoreSeconds: r.cost,
		}
		switch {
		case e.quota.Cores == 0:
			ts.State = Unlimited
		case r.leased:
			ts.State = Leased
		default:
			ts.State = Local
		}
		if r.haveView {
			ts.FleetUsageCores, ts.FleetDemandCores, ts.FleetInstances = r.view.SumUsage, r.view.SumWants, r.view.Instances
		}
		for _, rt := range r.routes {
			ts.Routes = append(ts.Routes, *rt)
		}
		slices.SortFunc(ts.Routes, func(a, b RouteStats) int { return cmp.Compare(a.Route, b.Route) })
		s.Tenants = append(s.Tenants, ts)
	}
	return s
}

// Tenant returns the snapshot of the named tenant ("" for the default
// pool) and whether it is listed.
func (s Snapshot) Tenant(name string) (TenantSnapshot, bool) {
	for _, t := range s.Tenants {
		if t.Name == name && (name != "" || t.Default) {
			return t, true
		}
	}
	return TenantSnapshot{}, false
}

// CostRatio is the last round's core-seconds per second of handler wall
// time, read without a lock (NaN before the first measurement).
func (l *Limiter) CostRatio() float64 {
	b := l.ratio.Load()
	if b == 0 {
		return math.NaN()
	}
	return math.Float64frombits(b)
}
