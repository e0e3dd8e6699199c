package admit

import (
	"math"
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
	iv := int64(float64(time.Second) / l.Rate)
	if iv <= 0 {
		iv = 1
	}
	g := &gcra{interval: iv, tau: int64(burst-1) * iv}
	g.tat.Store(math.MinInt64 / 2) // long ago on any time scale: the bucket starts full
	return g
}

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

type quotaState struct {
	all    *gcra
	byCrit [levee.NumCriticalities]*gcra
}

func newQuotaState(q Quota) *quotaState {
	s := &quotaState{all: newGCRA(Limit{q.Rate, q.Burst})}
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
