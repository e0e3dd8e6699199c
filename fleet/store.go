package fleet

import (
	"context"
	"sync"
	"time"
)

// Store is where the instances of a fleet meet: each period every instance
// sends its claims and reads back its grants (Round). An implementation
// keeps, per tenant, each live instance's wants, lease (has) and usage
// with the time it last reported, measured by the store's own clock so
// that the instances' clocks do not matter; it drops the entries of
// instances silent for longer than the round's TTL (their leases go back
// to the pool), grants each claim min(Target, Quota − the others'
// leases), and counts the live instances. One round is applied
// atomically per tenant. Exchange must honour ctx and be safe for
// concurrent use.
//
// The production store is Redis (package
// github.com/levee-dev/levee/fleet/fleetredis); MemStore is the same
// rules in memory, for simulation and tests on virtual time.
type Store interface {
	Exchange(ctx context.Context, r *Round) error
}

// MemStore is a Store in memory: the rules of the Redis store, kept in
// this process, with the clock it is given. It is what the simulator's
// fleet runs on; it shares nothing between processes. Safe for concurrent
// use.
type MemStore struct {
	mu    sync.Mutex
	now   func() time.Time
	inst  map[string]time.Time
	pools map[poolKey]*memPool
}

type poolKey struct {
	tenant string
	def    bool
}

type memEntry struct {
	w, h, u int64 // micro-cores
	seen    time.Time
}

type memPool struct {
	e          map[string]memEntry
	w, h, u    int64
	oldest     time.Time // no entry is older (a lower bound)
	haveOldest bool
}

// NewMemStore returns an empty MemStore reading time from now (nil:
// time.Now).
func NewMemStore(now func() time.Time) *MemStore {
	if now == nil {
		now = time.Now
	}
	return &MemStore{now: now, inst: map[string]time.Time{}, pools: map[poolKey]*memPool{}}
}

// Exchange applies r at the store's time: see Store.
func (m *MemStore) Exchange(ctx context.Context, r *Round) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	cutoff := now.Add(-r.TTL)
	m.inst[r.Instance] = now
	for id, t := range m.inst {
		if t.Before(cutoff) {
			delete(m.inst, id)
		}
	}
	r.Live = len(m.inst)
	r.Grants = r.Grants[:0]
	for _, c := range r.Claims {
		r.Grants = append(r.Grants, m.apply(r.Instance, c, now, cutoff))
	}
	return nil
}

func (m *MemStore) apply(id string, c Claim, now, cutoff time.Time) Grant {
	k := poolKey{c.Tenant, c.Default}
	p := m.pools[k]
	if p == nil {
		p = &memPool{e: map[string]memEntry{}}
		m.pools[k] = p
	}
	p.expire(id, cutoff)
	old := p.e[id]
	p.w, p.h, p.u = p.w-old.w, p.h-old.h, p.u-old.u
	var has int64
	if c.Release {
		delete(p.e, id)
	} else {
		has = grant(ToMicro(c.Quota), ToMicro(c.Target), p.h)
		e := memEntry{w: ToMicro(c.Wants), h: has, u: ToMicro(c.Usage), seen: now}
		p.e[id] = e
		p.w, p.h, p.u = p.w+e.w, p.h+e.h, p.u+e.u
		if !p.haveOldest {
			p.oldest, p.haveOldest = now, true
		}
	}
	g := Grant{Has: FromMicro(has), SumWants: FromMicro(p.w), SumHas: FromMicro(p.h), SumUsage: FromMicro(p.u), Instances: len(p.e)}
	if len(p.e) == 0 {
		delete(m.pools, poolKey{c.Tenant, c.Default})
	}
	return g
}

// expire drops the entries (other than id's) last seen before cutoff.
// It scans only when the oldest entry may be that old.
func (p *memPool) expire(id string, cutoff time.Time) {
	if !p.haveOldest || !p.oldest.Before(cutoff) {
		return
	}
	p.haveOldest = false
	for k, e := range p.e {
		if k != id && e.seen.Before(cutoff) {
			p.w, p.h, p.u = p.w-e.w, p.h-e.h, p.u-e.u
			delete(p.e, k)
			continue
		}
		if !p.haveOldest || e.seen.Before(p.oldest) {
			p.oldest, p.haveOldest = e.seen, true
		}
	}
}
