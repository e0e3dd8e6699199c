package fleet

import (
	"hash/maphash"
	"sync/atomic"
	"time"
)

// tenantState is one tenant's (or the default pool's) state on this
// instance: the bucket and counters Allow touches, the meters spans add
// to, and the round's bookkeeping (r, under Limiter.mu).
type tenantState struct {
	name string
	def  bool

	tat      atomic.Int64 // GCRA theoretical arrival time, unix ns
	inc      atomic.Int64 // lease ns charged per admitted request; < 0: no lease
	minTol   atomic.Int64 // least burst tolerance, ns (minTolRequests × inc)
	admitted atomic.Int64 // since the last round
	rejected atomic.Int64
	routes   atomic.Pointer[routeTable]

	r tenantRound
}

func newTenantState(name string, def bool) *tenantState {
	return &tenantState{name: name, def: def}
}

// routeSlots is the number of routes metered apart per tenant; the others
// share the slot named OtherRoute.
const routeSlots = 16

// OtherRoute names the meter that holds a tenant's routes beyond the first
// 16 it used.
const OtherRoute = "(other)"

type routeTable struct {
	slots [routeSlots]routeSlot
	other routeSlot
}

// routeSlot meters one route of one tenant. key is 0 while free,
// slotPending while being claimed, and the route's hash (odd) once name is
// set: name is read only after key has been seen odd.
type routeSlot struct {
	key  atomic.Uint64
	name string
	wall atomic.Int64 // ns of handler wall time since the last round
	n    atomic.Int64 // requests since the last round
	cost atomic.Int64 // ns of core time given by Charge or Span.EndCost
}

const slotPending = 2

func newRouteTable() *routeTable {
	rt := &routeTable{}
	rt.other.name = OtherRoute
	rt.other.key.Store(1)
	return rt
}

// slot returns the meter of tenant's route: lock-free; it allocates only
// the first time a tenant (or the default pool) is metered.
func (l *Limiter) slot(tenant, route string) *routeSlot {
	st := l.table.Load().lookup(tenant).st
	rt := st.routes.Load()
	if rt == nil {
		rt = newRouteTable()
		if !st.routes.CompareAndSwap(nil, rt) {
			rt = st.routes.Load()
		}
	}
	h := maphash.String(l.seed, route) | 1
	for i := range uint64(routeSlots) {
		s := &rt.slots[(h>>1+i)%routeSlots]
		k := s.key.Load()
		if k == h {
			return s
		}
		if k == 0 && s.key.CompareAndSwap(0, slotPending) {
			s.name = route
			s.key.Store(h)
			return s
		}
	}
	return &rt.other
}

// maxSpan bounds one request's recorded wall time or cost.
const maxSpan = int64(time.Hour)

func (s *routeSlot) addWall(d int64) {
	s.wall.Add(min(max(d, 0), maxSpan))
	s.n.Add(1)
}

func (s *routeSlot) addCost(d int64) {
	s.cost.Add(min(max(d, 0), maxSpan))
	s.n.Add(1)
}

// monoBase anchors the monotonic clock of spans (set once, never changed).
var monoBase = time.Now()

func mono() int64 { return int64(time.Since(monoBase)) }

// Span measures one request's handler wall time, which the meter turns
// into CPU cost (see the package documentation). Start it when the
// handler starts and End it when the handler returns; a Span is a small
// value, End it once. The zero Span's methods do nothing.
type Span struct {
	s     *routeSlot
	start int64
}

// Start begins metering a request of tenant on route (a route pattern,
// such as "GET /v1/items/{id}", not a raw path: each tenant meters 16
// routes apart). Tenants not in the Config are metered in the default
// pool. Lock-free; it allocates only the first time a tenant is metered.
func (l *Limiter) Start(tenant, route string) Span {
	return Span{l.slot(tenant, route), mono()}
}

// End records the request's wall time since Start. Lock-free, no
// allocation.
func (sp Span) End() {
	if sp.s != nil {
		sp.s.addWall(mono() - sp.start)
	}
}

// EndCost records the request's cost as given, in core time, instead of
// its wall time: for handlers that know what they cost (a cost function,
// or a CPU clock of their own). Negative costs count as 0.
func (sp Span) EndCost(cost time.Duration) {
	if sp.s != nil {
		sp.s.addCost(int64(cost))
	}
}

// Record meters a finished request of tenant on route whose handler ran
// for wall: Start and End for callers who measure time themselves (or on
// virtual time).
func (l *Limiter) Record(tenant, route string, wall time.Duration) {
	l.slot(tenant, route).addWall(int64(wall))
}

// Charge meters a finished request of tenant on route that cost cost in
// core time, as given by the caller (see Span.EndCost).
func (l *Limiter) Charge(tenant, route string, cost time.Duration) {
	l.slot(tenant, route).addCost(int64(cost))
}

// drained is what one route slot metered during a round.
type drained struct {
	name       string
	wall, cost int64 // ns
	n          int64
}

// drain empties st's route meters into buf.
func (st *tenantState) drain(buf []drained) []drained {
	rt := st.routes.Load()
	if rt == nil {
		return buf
	}
	take := func(s *routeSlot) {
		if s.key.Load()&1 == 0 {
			return
		}
		d := drained{name: s.name, wall: s.wall.Swap(0), cost: s.cost.Swap(0), n: s.n.Swap(0)}
		if d.n != 0 || d.wall != 0 || d.cost != 0 {
			buf = append(buf, d)
		}
	}
	for i := range rt.slots {
		take(&rt.slots[i])
	}
	take(&rt.other)
	return buf
}
