package retry

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/internal/epoch"
	"github.com/levee-dev/levee/internal/option"
)

// Budget limits retries across many calls, so that a struggling dependency
// sees at most a bounded share of extra load however many callers fail at
// once. A retry is allowed while either
//
//   - the ratio part has room: retries in the last Window (10 s) stay at or
//     below Ratio (10%) of the requests in that window, or
//   - the floor has room: fewer than Floor (60) retries were allowed by the
//     floor in the last FloorWindow (1 min) — the founding text's "60 retries
//     per process per minute", which lets a quiet client still retry.
//
// So a busy client adds at most ×1.1 load and a quiet one at most 60 retries
// a minute. When neither has room the retry is refused at once: the caller
// fails without sending (Do returns a *GiveUpError matching
// ErrBudgetExhausted).
//
// The ratio window is a ring of 10 buckets; the floor is a sliding log of
// its last Floor grant times (exact: never more than Floor grants in any
// FloorWindow). Both are lock-free and allocation-free; under concurrency a
// grant may overshoot by the number of goroutines racing on the same check.
// A Budget is safe for concurrent use. Create one with NewBudget; the zero
// Budget allows nothing. Times may come slightly out of order from
// concurrent callers. A time read from the clock (time.Now) counts on its
// monotonic reading, immune to steps of the wall clock; a virtual clock
// that jumps backwards finds the floor used up and the ratio window empty
// until it catches up, so a new virtual-time run needs a new Budget.
type Budget struct {
	unlimited bool

	ratio    float64
	bucketUs int64
	ring     []budgetBucket
	// Sums over the closed buckets of the window, recomputed once per
	// bucket by the first TryRetryAt that sees a new one.
	closedAt             atomic.Int64
	closedReq, closedRet atomic.Int64

	floorUs int64
	log     []atomic.Int64 // grant times (µs) of the floor, oldest at head
	head    atomic.Uint64

	requests, retries, refused atomic.Uint64
}

type budgetBucket struct {
	epoch atomic.Int64
	req   atomic.Int64
	ret   atomic.Int64
	_     [40]byte // one bucket per cache line
}

const (
	ratioBuckets = 10
	emptySlot    = math.MinInt64
)

type budgetConfig struct {
	ratio       float64
	window      time.Duration
	floor       int
	floorWindow time.Duration
}

// BudgetOption configures NewBudget. An out-of-range value makes NewBudget
// panic (see the package documentation).
type BudgetOption func(*budgetConfig)

// WithRatio sets the share of requests that may be retried (default 0.1;
// range [0, 1]) over window (default 10s; range [100ms, 24h], rounded to
// tenths; 0 means the default). ratio 0 disables the ratio part, leaving
// only the floor: NewBudget(WithRatio(0, 0)) is the founding text's "60 per
// minute, then fail at once".
func WithRatio(ratio float64, window time.Duration) BudgetOption {
	return func(c *budgetConfig) {
		option.Check(ratio >= 0 && ratio <= 1, "retry", "WithRatio", "ratio must be in [0, 1]", ratio, window)
		c.ratio = ratio
		option.Set(&c.window, window, window >= 100*time.Millisecond && window <= 24*time.Hour, "retry", "WithRatio",
			"window must be in [100ms, 24h] (0 means the default, 10s)", ratio, window)
	}
}

// WithFloor sets the floor: n retries (default 60; range [0, 1e6]) in any
// window of length per (default 1 minute; range [1ms, 24h]; 0 means the
// default) are allowed whatever the ratio says. n 0 disables the floor.
// The floor keeps n grant times, so n costs 8 bytes each.
func WithFloor(n int, per time.Duration) BudgetOption {
	return func(c *budgetConfig) {
		option.Check(n >= 0 && n <= 1e6, "retry", "WithFloor", "n must be in [0, 1e6]", n, per)
		c.floor = n
		option.Set(&c.floorWindow, per, per >= time.Millisecond && per <= 24*time.Hour, "retry", "WithFloor",
			"per must be in [1ms, 24h] (0 means the default, 1m)", n, per)
	}
}

// NewBudget returns a Budget; with no options it allows retries up to 10% of
// requests over 10 s plus 60 per minute. It panics on an option value out
// of its documented range, a programming error.
func NewBudget(opts ...BudgetOption) *Budget {
	c := budgetConfig{ratio: 0.1, window: 10 * time.Second, floor: 60, floorWindow: time.Minute}
	for _, o := range opts {
		o(&c)
	}
	b := &Budget{ratio: c.ratio, floorUs: c.floorWindow.Microseconds()}
	if c.ratio > 0 {
		b.bucketUs = max(c.window.Microseconds()/ratioBuckets, 1)
		b.ring = make([]budgetBucket, ratioBuckets)
		b.closedAt.Store(emptySlot)
		for i := range b.ring {
			b.ring[i].epoch.Store(emptySlot)
		}
	}
	if c.floor > 0 {
		b.log = make([]atomic.Int64, c.floor)
		for i := range b.log {
			b.log[i].Store(emptySlot)
		}
	}
	return b
}

var defaultBudget = sync.OnceValue(func() *Budget { return NewBudget() })

// DefaultBudget returns the process-wide Budget (NewBudget() defaults) used
// by every Policy whose Budget is nil. It is built on first use and is the
// one piece of package-level state in levee: the founding text's budget is
// per process, so every client without its own shares it.
func DefaultBudget() *Budget { return defaultBudget() }

var unlimited = &Budget{unlimited: true}

// Unlimited returns a Budget that allows every retry: the naive clients of
// the simulator. Do not use it in production.
func Unlimited() *Budget { return unlimited }

func (b *Budget) bucket(e int64) *budgetBucket {
	x := &b.ring[epoch.Slot(e, ratioBuckets)]
	if ep := x.epoch.Load(); ep != e && (ep == emptySlot || ep < e) && x.epoch.CompareAndSwap(ep, e) {
		x.req.Store(0)
		x.ret.Store(0)
	}
	return x
}

// RequestAt counts a first attempt (not a retry) made at now. Do and Begin
// call it; call it yourself only when you use TryRetryAt directly. Safe for
// concurrent use, no allocation.
func (b *Budget) RequestAt(now time.Time) {
	if b == nil || b.unlimited {
		return
	}
	b.requests.Add(1)
	if b.ring == nil {
		return
	}
	b.bucket(epoch.Bucket(epoch.Micros(now), b.bucketUs)).req.Add(1)
}

// TryRetryAt reports whether a retry may be sent at now and, if so, counts
// it. A false answer means: fail now, without sending. A nil Budget allows
// nothing. Safe for concurrent use, no allocation.
func (b *Budget) TryRetryAt(now time.Time) bool {
	if b == nil {
		return false
	}
	if b.unlimited {
		return true
	}
	us := epoch.Micros(now)
	if b.ring != nil {
		e := epoch.Bucket(us, b.bucketUs)
		if b.closedAt.Load() != e {
			b.sumClosed(e)
		}
		cur := b.bucket(e)
		req := b.closedReq.Load() + cur.req.Load()
		ret := b.closedRet.Load() + cur.ret.Load()
		if float64(ret+1) <= b.ratio*float64(req) {
			cur.ret.Add(1)
			b.retries.Add(1)
			return true
		}
	}
	if n := uint64(len(b.log)); n > 0 {
		for {
			h := b.head.Load()
			slot := &b.log[h%n]
			old := slot.Load()
			if old != emptySlot && us-old < b.floorUs {
				break
			}
			if b.head.CompareAndSwap(h, h+1) {
				slot.Store(us)
				b.retries.Add(1)
				return true
			}
		}
	}
	b.refused.Add(1)
	return false
}

// sumClosed sums the buckets of the window before bucket e. Concurrent
// callers may both compute it; they store the same sums.
func (b *Budget) sumClosed(e int64) {
	var req, ret int64
	for i := range b.ring {
		x := &b.ring[i]
		if ep := x.epoch.Load(); ep != emptySlot && ep < e && ep > e-ratioBuckets {
			req += x.req.Load()
			ret += x.ret.Load()
		}
	}
	b.closedReq.Store(req)
	b.closedRet.Store(ret)
	b.closedAt.Store(e)
}

// Request is RequestAt(time.Now()).
func (b *Budget) Request() { b.RequestAt(time.Now()) }

// TryRetry is TryRetryAt(time.Now()).
func (b *Budget) TryRetry() bool { return b.TryRetryAt(time.Now()) }

// BudgetStats are cumulative counters of a Budget, for metrics.
type BudgetStats struct {
	// Requests counted by RequestAt.
	Requests uint64
	// Retries granted by TryRetryAt.
	Retries uint64
	// Refused retries: TryRetryAt said false.
	Refused uint64
}

// Stats returns the Budget's cumulative counters (zero for Unlimited).
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{Requests: b.requests.Load(), Retries: b.retries.Load(), Refused: b.refused.Load()}
}
