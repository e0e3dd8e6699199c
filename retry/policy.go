package retry

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Jitter selects how Policy.Backoff randomizes the exponential backoff.
type Jitter uint8

const (
	// FullJitter (the zero value, the default) waits U(0, ceiling), where
	// ceiling = min(Cap, Base·Multiplier^(n−1)) for the n-th retry. It
	// spreads simultaneous failures the most.
	FullJitter Jitter = iota
	// EqualJitter waits ceiling/2 + U(0, ceiling/2): never less than half
	// the ceiling.
	EqualJitter
	// DecorrelatedJitter waits min(Cap, U(Base, 3·prev)), where prev is the
	// previous wait (Base for the first retry).
	DecorrelatedJitter
	// NoJitter waits exactly the ceiling: Base 3s, Multiplier 2 gives the
	// founding text's 3s→6s→12s. Simultaneous failures retry together, so
	// use it only for a single client or a demonstration.
	NoJitter
)

// String returns "full", "equal", "decorrelated" or "none".
func (j Jitter) String() string {
	switch j {
	case FullJitter:
		return "full"
	case EqualJitter:
		return "equal"
	case DecorrelatedJitter:
		return "decorrelated"
	case NoJitter:
		return "none"
	}
	return "Jitter(" + strconv.Itoa(int(j)) + ")"
}

// Defaults of a zero Policy.
const (
	// DefaultMaxAttempts is the number of attempts, the first included, of a
	// Policy whose MaxAttempts is 0: one try and two retries.
	DefaultMaxAttempts = 3
	// DefaultBase is the backoff base of a Policy whose Base is 0.
	DefaultBase = 100 * time.Millisecond
	// DefaultCap is the backoff cap of a Policy whose Cap is 0.
	DefaultCap = 10 * time.Second
	// DefaultMultiplier is the backoff growth of a Policy whose Multiplier
	// is 0.
	DefaultMultiplier = 2.0
	// DefaultTimeout bounds a whole call (all attempts and waits) when the
	// caller's context carries no deadline and Policy.Timeout is 0. A small,
	// finite timeout is itself overload protection: work nobody waits for is
	// never queued forever.
	DefaultTimeout = 10 * time.Second
)

// Policy says how many times and when a failed call is retried. It is a
// plain value: the zero Policy means the documented defaults (3 attempts,
// full jitter over 100ms·2^n capped at 10s, DefaultTimeout, the process-wide
// DefaultBudget). A Policy is read-only once in use and may be shared.
type Policy struct {
	// MaxAttempts counts attempts including the first; 0 means
	// DefaultMaxAttempts (3). 1 disables retries. Values above 3 are
	// allowed (the simulator models naive clients with them) but
	// discouraged: each layer that retries n times multiplies the load on
	// an overloaded backend by n+1. Negative values count as 1.
	MaxAttempts int
	// Base is the backoff ceiling of the first retry; 0 means DefaultBase.
	Base time.Duration
	// Cap bounds every backoff; 0 means DefaultCap. The founding text's
	// 3s→6s→12s is Policy{Base: 3 * time.Second, Cap: 12 * time.Second,
	// Jitter: NoJitter, MaxAttempts: 4}.
	Cap time.Duration
	// Multiplier is the growth of the ceiling per retry; 0 (or below 1)
	// means DefaultMultiplier (2).
	Multiplier float64
	// Jitter randomizes each wait; the zero value is FullJitter.
	Jitter Jitter
	// AttemptTimeout bounds each attempt; 0 means no per-attempt bound
	// beyond the overall deadline. Do and levee's transports (leveehttp's
	// Transport, leveegrpc's client interceptors) give each attempt the
	// earlier of the call's deadline and now + AttemptTimeout; Attempts
	// only steps the decisions, so a caller driving it applies the bound
	// itself. An attempt that runs out of its own time while the call has
	// time left is retryable when the call is idempotent.
	AttemptTimeout time.Duration
	// Timeout bounds the whole call when the context has no deadline;
	// 0 means DefaultTimeout. A context deadline always wins.
	Timeout time.Duration
	// Budget limits retries across calls; nil means DefaultBudget(). Use
	// Unlimited() to disable the limit (naive clients in the simulator).
	Budget *Budget
	// NotIdempotent says the call must not run twice (a POST without an
	// idempotency key): it is retried only after errors that prove the
	// request never reached the server (see Unsent and Classify).
	NotIdempotent bool
	// Rand returns uniformly distributed 64-bit values; it drives every
	// jitter decision, so a seeded source makes a run reproducible. nil
	// means math/rand/v2's runtime source. It must be safe for concurrent
	// use if the Policy is shared by concurrent calls.
	Rand func() uint64
}

func (p *Policy) maxAttempts() int {
	switch {
	case p.MaxAttempts == 0:
		return DefaultMaxAttempts
	case p.MaxAttempts < 1:
		return 1
	}
	return p.MaxAttempts
}

func (p *Policy) base() time.Duration { return orDefault(p.Base, DefaultBase) }

func (p *Policy) cap() time.Duration { return orDefault(p.Cap, DefaultCap) }

func (p *Policy) multiplier() float64 {
	if !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 0) {
		return DefaultMultiplier
	}
	return p.Multiplier
}

func (p *Policy) timeout() time.Duration { return orDefault(p.Timeout, DefaultTimeout) }

// orDefault is the rule of Policy's durations: zero (or below) means the
// default.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func (p *Policy) budget() *Budget {
	if p.Budget == nil {
		return DefaultBudget()
	}
	return p.Budget
}

// uniform returns a float64 in [0, 1) from p.Rand or the runtime source.
func (p *Policy) uniform() float64 {
	var x uint64
	if p.Rand != nil {
		x = p.Rand()
	} else {
		x = rand.Uint64()
	}
	return float64(x>>11) / (1 << 53)
}

// Ceiling returns the backoff ceiling of the n-th retry (n ≥ 1):
// min(Cap, Base·Multiplier^(n−1)). n below 1 counts as 1.
func (p Policy) Ceiling(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	limit := p.cap()
	c := float64(p.base()) * math.Pow(p.multiplier(), float64(n-1))
	if !(c < float64(limit)) { // also catches +Inf and NaN
		return limit
	}
	return min(time.Duration(c), limit)
}

// Backoff returns the wait before the n-th retry (n ≥ 1) given the previous
// wait prev (used by DecorrelatedJitter only; 0 on the first retry) and a
// uniform random value u in [0, 1) (values outside are clamped). It is a
// pure function: the same arguments give the same wait. Every result lies in
// [0, Cap].
func (p Policy) Backoff(n int, prev time.Duration, u float64) time.Duration {
	if !(u >= 0) {
		u = 0
	}
	if u >= 1 {
		u = math.Nextafter(1, 0)
	}
	ceil := p.Ceiling(n)
	var w float64
	switch p.Jitter {
	case NoJitter:
		return ceil
	case EqualJitter:
		half := float64(ceil) / 2
		w = half + u*half
	case DecorrelatedJitter:
		base, limit := p.base(), p.cap()
		if base > limit {
			base = limit
		}
		if prev < base {
			prev = base
		}
		w = float64(base) + u*(3*float64(prev)-float64(base))
		ceil = limit
	default:
		w = u * float64(ceil)
	}
	// Rounding near the limits of float64 must not leave [0, ceil].
	if !(w < float64(ceil)) {
		return ceil
	}
	return max(min(time.Duration(w), ceil), 0)
}
