package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// vfleet is a fleet of Limiters on virtual time sharing a MemStore: each
// instance gets, per tenant, a steady demand (cores) of requests of a
// fixed cost, admitted through Allow and charged at once.
type vfleet struct {
	t        testing.TB
	now      time.Time
	store    *MemStore
	inst     []*vinst
	storeErr error // exchanges fail while set
	step     time.Duration
}

type vinst struct {
	l      *Limiter
	next   time.Time // next round
	dead   bool
	demand map[string]float64 // tenant -> cores offered here
	cost   map[string]time.Duration
	acc    map[string]float64 // fractional requests carried over
	used   map[string]float64 // core-seconds admitted, since reset
	offer  map[string]int
	refuse map[string]int
}

func newVFleet(t testing.TB, cfg Config, n int, opts ...Option) *vfleet {
	f := &vfleet{t: t, now: time.Unix(1_000_000, 0), step: time.Millisecond}
	f.store = NewMemStore(func() time.Time { return f.now })
	for i := range n {
		o := append([]Option{WithInstance(string(rune('a' + i))), WithCPU(nil), WithInitialInstances(n)}, opts...)
		l, err := New(cfg, o...)
		if err != nil {
			t.Fatal(err)
		}
		f.inst = append(f.inst, &vinst{
			l: l, next: f.now.Add(time.Duration(i) * l.Period() / time.Duration(n)),
			demand: map[string]float64{}, cost: map[string]time.Duration{}, acc: map[string]float64{},
			used: map[string]float64{}, offer: map[string]int{}, refuse: map[string]int{},
		})
	}
	return f
}

// load sets tenant's demand on instance i: cores of requests costing cost.
func (f *vfleet) load(i int, tenant string, cores float64, cost time.Duration) {
	f.inst[i].demand[tenant] = cores
	f.inst[i].cost[tenant] = cost
}

func (f *vfleet) reset() {
	for _, in := range f.inst {
		clear(in.used)
		clear(in.offer)
		clear(in.refuse)
	}
}

// run advances d of virtual time.
func (f *vfleet) run(d time.Duration) {
	end := f.now.Add(d)
	for f.now.Before(end) {
		f.now = f.now.Add(f.step)
		for _, in := range f.inst {
			if in.dead {
				continue
			}
			for tenant, cores := range in.demand {
				c := in.cost[tenant]
				in.acc[tenant] += cores * f.step.Seconds() / c.Seconds()
				for in.acc[tenant] >= 1 {
					in.acc[tenant]--
					in.offer[tenant]++
					if _, ok := in.l.Allow(tenant, levee.Critical, f.now); !ok {
						in.refuse[tenant]++
						continue
					}
					in.l.Charge(tenant, "r", c)
					in.used[tenant] += c.Seconds()
				}
			}
			if !f.now.Before(in.next) {
				in.next = in.next.Add(in.l.Period())
				r := in.l.BeginRound(f.now)
				err := f.storeErr
				if err == nil {
					err = f.store.Exchange(context.Background(), r)
				}
				in.l.FinishRound(f.now, r, err)
			}
		}
	}
}

// usage returns tenant's admitted cost per second over d, fleet-wide.
func (f *vfleet) usage(tenant string, d time.Duration) float64 {
	var s float64
	for _, in := range f.inst {
		s += in.used[tenant]
	}
	return s / d.Seconds()
}

func (f *vfleet) refused(tenant string) (refused, offered int) {
	for _, in := range f.inst {
		refused += in.refuse[tenant]
		offered += in.offer[tenant]
	}
	return refused, offered
}
