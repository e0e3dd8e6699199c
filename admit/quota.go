package admit

import (
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
)

// gcra is a lock-free token bucket (the generic cell rate algorithm): tat
// is the theoretical arrival time of the next request; a request at now
// conforms if tat − now ≤ tau, and then moves tat one interval on.
type gcra struct {
	tat      atomic.Int64
	interval int64 // ns per token
	tau      int64 // ns of burst tolerance: (burst−1)·interval
}

func newGCRA(l Limit) *gcra {
	if !(l.Rate > 0) || math.IsInf(l.Rate, 0) {
		return nil
	}
	burst := l.Burst
	if burst <= 0 {
		burst = max(1, int(math.Ceil(l.Rate)))
	}
	// Both spans are bounded so that a tiny rate or a huge burst cannot
	// overflow: converted unchecked, a rate of 1e-12/s gave an interval
	// out of int64's range, which became 1 ns (a billion tokens a
	// second), and (burst−1)·interval wrapped negative. A rate below one
	// token in maxInterval is one in maxInterval; a burst whose tolerance
	// would pass maxSpan holds maxSpan ÷ interval tokens beyond the first
	// (1,024 at the slowest rate; all of a burst of 10⁹ at 1/s or more).
	iv := maxInterval
	if f := float64(time.Second) / l.Rate; f < float64(maxInterval) {
		iv = max(1, int64(f))
	}
	tau := maxSpan
	if b := int64(burst - 1); b < maxSpan/iv {
		tau = b * iv
	}
	g := &gcra{interval: iv, tau: tau}
	g.tat.Store(math.MinInt64 / 2) // long ago on any time scale: the bucket starts full
	return g
}

// maxSpan bounds a bucket's burst tolerance (about 36 years) and
// maxInterval its interval (about 13 days), so that a time on the
// controller's scale plus both stays within int64.
const (
	maxSpan     = int64(1) << 60
	maxInterval = int64(1) << 50
)

// take consumes a token at now (ns) or returns how long until one is
// available.
func (g *gcra) take(now int64) (wait int64, ok bool) { return g.takeWithin(now, g.tau) }

// takeSpare consumes a token only if the bucket holds half its burst or
// more: what is left when the requests that take tokens first have taken
// theirs.
func (g *gcra) takeSpare(now int64) bool {
	_, ok := g.takeWithin(now, g.tau/2)
	return ok
}

// takeWithin consumes a token at now if tat − now ≤ tau.
func (g *gcra) takeWithin(now, tau int64) (wait int64, ok bool) {
	for {
		old := g.tat.Load()
		tat := max(old, now)
		if tat-now > tau {
			return tat - now - tau, false
		}
		if g.tat.CompareAndSwap(old, tat+g.interval) {
			return 0, true
		}
	}
}

// quotaState is one tenant's buckets, and the Quota they enforce.
type quotaState struct {
	q      Quota
	all    *gcra
	byCrit [levee.NumCriticalities]*gcra
}

// quotaSet is the tenant quotas in force, published whole (SetQuotas).
type quotaSet map[string]*quotaState

func newQuotaState(q Quota) *quotaState {
	s := &quotaState{q: q, all: newGCRA(Limit{q.Rate, q.Burst})}
	for c, l := range q.ByCriticality {
		s.byCrit[c] = newGCRA(l)
	}
	return s
}

// take checks the criticality's bucket, then the tenant's. A request
// refused by the tenant bucket has already used a token of its
// criticality's bucket: the per-criticality limit errs on the strict side.
func (s *quotaState) take(c levee.Criticality, now int64) (wait int64, ok bool) {
	if g := s.byCrit[c]; g != nil {
		if w, ok := g.take(now); !ok {
			return w, false
		}
	}
	if s.all != nil {
		return s.all.take(now)
	}
	return 0, true
}

// Retry-After values are quantized to a geometric table (8 steps per
// doubling, 1 ms to ~70 min) so that every rejection error can be
// preallocated.
const (
	raSteps = 8 * 22
	raBase  = time.Millisecond
)

func raValue(i int) time.Duration {
	return time.Duration(float64(raBase) * math.Exp2(float64(i)/8))
}

// raIndex returns the index of the smallest table value ≥ d.
func raIndex(d time.Duration) int {
	if d <= raBase {
		return 0
	}
	i := int(math.Ceil(8 * math.Log2(float64(d)/float64(raBase))))
	if i >= raSteps {
		i = raSteps - 1
	}
	if i > 0 && raValue(i-1) >= d { // guard against rounding up one too far
		i--
	}
	return i
}

// SetQuotas replaces every tenant quota at once (those of WithQuota too)
// with q, which it copies; an empty or nil q removes them all. A tenant
// whose Quota is unchanged keeps its bucket (its tokens, its debt); a new
// or changed one starts with a full bucket. The next Admit sees the whole
// new set, never a mix of old and new: the set is published with one
// atomic pointer, so the accept path still takes no lock and does not
// allocate. Safe for concurrent use; calls are serialised.
//
// A quota WithQuota would refuse (an empty tenant, a negative, NaN or
// infinite Rate, a negative Burst) is not applied: that tenant keeps the
// quota it had (none if it had none), and the problem is logged (to
// WithLogger's logger, else slog.Default()). Configuration files are
// validated before they get here (package config), so this is a last
// guard, not the place users see their mistakes.
func (c *Controller) SetQuotas(q map[string]Quota) {
	c.quotaMu.Lock()
	defer c.quotaMu.Unlock()
	var old quotaSet
	if p := c.quotas.Load(); p != nil {
		old = *p
	}
	next := make(quotaSet, len(q))
	for _, tenant := range slices.Sorted(maps.Keys(q)) { // sorted: problems logged in a stable order
		v := q[tenant]
		if p := quotaProblem(tenant, v); p != "" {
			c.logger().Error("admit: SetQuotas: quota not applied, the tenant keeps its previous one", "tenant", tenant, "problem", p)
			if s := old[tenant]; s != nil {
				next[tenant] = s
			}
			continue
		}
		if s := old[tenant]; s != nil && s.q == v {
			next[tenant] = s
			continue
		}
		next[tenant] = newQuotaState(v)
	}
	if len(next) == 0 {
		c.quotas.Store(nil)
		return
	}
	c.quotas.Store(&next)
}

// Quotas returns a copy of the tenant quotas in force.
func (c *Controller) Quotas() map[string]Quota {
	p := c.quotas.Load()
	if p == nil {
		return map[string]Quota{}
	}
	out := make(map[string]Quota, len(*p))
	for t, s := range *p {
		out[t] = s.q
	}
	return out
}
