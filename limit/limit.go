package limit

import (
	"fmt"
	"math"
	"time"

	"github.com/levee-dev/levee/internal/option"
	"github.com/levee-dev/levee/internal/smooth"
)

// Limiter is an adaptive concurrency limit.
type Limiter interface {
	// Limit returns the current limit, at least 1.
	Limit() int
	// Update feeds one sample window ending at now: rtt is the window's
	// round-trip time (non-positive values are ignored) and inflight the
	// peak number of requests in flight during the window.
	Update(now time.Time, rtt time.Duration, inflight int)
}

// Option configures a Gradient or an AIMD. An out-of-range value makes
// the constructor panic (see the package documentation).
type Option func(*params)

// params holds the options; 0 in initial, min and max means "not given":
// their defaults depend on each other.
type params struct {
	initial, min, max int
	smoothing         float64
	tolerance         float64
	longWindow        int
	backoff           float64
	threshold         time.Duration
	minRTTWindow      time.Duration
}

// Defaults of the options whose default depends on the others.
const (
	defaultInitial = 20
	defaultMin     = 4
	defaultMax     = 1000
)

func defaults() params {
	return params{smoothing: 0.2, tolerance: 1.5, longWindow: 600, backoff: 0.9, minRTTWindow: 30 * time.Second}
}

func build(opts []Option) params {
	p := defaults()
	for _, o := range opts {
		o(&p)
	}
	minSet, initialSet := p.min != 0, p.initial != 0
	if p.max == 0 {
		p.max = max(defaultMax, p.min)
	}
	if !minSet {
		p.min = min(defaultMin, p.max)
	}
	option.Check(p.min <= p.max, "limit", "WithMinLimit", fmt.Sprintf("must be ≤ the max limit %d", p.max), p.min)
	if !initialSet {
		p.initial = max(p.min, min(defaultInitial, p.max))
	}
	option.Check(p.initial >= p.min && p.initial <= p.max, "limit", "WithInitialLimit",
		fmt.Sprintf("must be in [min limit %d, max limit %d]", p.min, p.max), p.initial)
	return p
}

// check panics unless ok, naming the option, its value and its range.
func check(ok bool, name, want string, v any) { option.Check(ok, "limit", name, want, v) }

// set applies an option whose zero value means its default (see option.Set).
func set[T comparable](dst *T, v T, ok bool, name, want string) {
	option.Set(dst, v, ok, "limit", name, want)
}

// WithInitialLimit sets the limit before any sample. Default 20 (raised to
// the min limit or lowered to the max limit when they exclude it); range
// [min limit, max limit]; 0 means the default.
func WithInitialLimit(n int) Option {
	return func(p *params) {
		check(n >= 0, "WithInitialLimit", "must be in [min limit, max limit] (0 means the default, 20)", n)
		p.initial = n
	}
}

// WithMinLimit sets the lowest limit. Default 4 (or the max limit, if
// lower); range [1, max limit]; 0 means the default. A minimum above 1
// keeps a slow but healthy dependency from being starved.
func WithMinLimit(n int) Option {
	return func(p *params) {
		check(n >= 0, "WithMinLimit", "must be in [1, max limit] (0 means the default, 4)", n)
		p.min = n
	}
}

// WithMaxLimit sets the highest limit. Default 1000 (or the min limit, if
// higher); range [min limit, 1e9]; 0 means the default.
func WithMaxLimit(n int) Option {
	return func(p *params) {
		check(n >= 0 && n <= 1e9, "WithMaxLimit", "must be in [min limit, 1e9] (0 means the default, 1000)", n)
		p.max = n
	}
}

// WithTolerance sets how much slower than its baseline a window may be
// before the limit shrinks. Gradient: the baseline is the long RTT average;
// AIMD: the minimum RTT (when no fixed threshold is set). Default 1.5
// (Gradient and AIMD alike); range [1, 100]; 0 means the default.
func WithTolerance(f float64) Option {
	return func(p *params) {
		set(&p.tolerance, f, f >= 1 && f <= 100, "WithTolerance", "must be in [1, 100] (0 means the default, 1.5)")
	}
}

// WithSmoothing sets the Gradient's weight of a new estimate against the
// current limit (1 = no smoothing). Default 0.2; range (0, 1]; 0 means the
// default.
func WithSmoothing(f float64) Option {
	return func(p *params) {
		set(&p.smoothing, f, f > 0 && f <= 1, "WithSmoothing", "must be in (0, 1] (0 means the default, 0.2)")
	}
}

// WithLongWindow sets the number of windows the Gradient's long RTT
// average spans (an exponential average with weight 2/(n+1)). Default 600
// (one minute of 100 ms windows); range [1, 1e6]; 0 means the default.
func WithLongWindow(n int) Option {
	return func(p *params) {
		set(&p.longWindow, n, n >= 1 && n <= 1e6, "WithLongWindow", "must be in [1, 1e6] (0 means the default, 600)")
	}
}

// WithBackoff sets the AIMD's multiplicative decrease. Default 0.9; range
// [0.1, 1); 0 means the default.
func WithBackoff(f float64) Option {
	return func(p *params) {
		set(&p.backoff, f, f >= 0.1 && f < 1, "WithBackoff", "must be in [0.1, 1) (0 means the default, 0.9)")
	}
}

// WithThreshold sets a fixed AIMD latency threshold: a window whose RTT is
// above it shrinks the limit. Default 0 = adaptive (Tolerance × the
// minimum RTT over MinRTTWindow); range [0, 1h].
func WithThreshold(d time.Duration) Option {
	return func(p *params) {
		check(d >= 0 && d <= time.Hour, "WithThreshold", "must be in [0, 1h] (0 means adaptive)", d)
		p.threshold = d
	}
}

// WithMinRTTWindow sets how long the AIMD remembers its minimum RTT, so
// that a dependency that became permanently slower sets a new baseline.
// Default 30s; range [1ms, 24h]; 0 means the default.
func WithMinRTTWindow(d time.Duration) Option {
	return func(p *params) {
		set(&p.minRTTWindow, d, d >= time.Millisecond && d <= 24*time.Hour, "WithMinRTTWindow", "must be in [1ms, 24h] (0 means the default, 30s)")
	}
}

// follow is the least limit after a healthy window with the given peak in
// flight: that many requests were served at a healthy RTT, so the limit
// leaves Tolerance of headroom above them. Without it a limit that grows
// by √limit or +1 per window would read a healthy traffic step (3× the
// requests at the same RTT) as overload for a second or more.
func follow(tolerance float64, inflight int) float64 {
	return math.Ceil(tolerance * float64(inflight))
}

func clamp(x float64, lo, hi int) float64 {
	return math.Max(float64(lo), math.Min(float64(hi), x))
}

// Gradient is a gradient-based adaptive concurrency limit (see the package
// documentation for the algorithm). The zero value is not usable; call
// NewGradient. Not safe for concurrent use.
type Gradient struct {
	p      params
	limit  float64
	long   float64 // long RTT average, ns; 0 before the first sample
	weight float64
}

var _ Limiter = (*Gradient)(nil)

// NewGradient returns a Gradient limit at its initial value. It panics on
// an out-of-range option (see the package documentation).
func NewGradient(opts ...Option) *Gradient {
	p := build(opts)
	return &Gradient{p: p, limit: float64(p.initial), weight: 2 / (float64(p.longWindow) + 1)}
}

// Limit returns the current limit.
func (g *Gradient) Limit() int { return int(g.limit) }

// Update feeds one window. now is not used: the Gradient's memory is
// counted in windows.
func (g *Gradient) Update(now time.Time, rtt time.Duration, inflight int) {
	if rtt <= 0 {
		return
	}
	short := float64(rtt)
	if g.long == 0 {
		g.long = short
	} else {
		g.long = smooth.Toward(g.long, short, g.weight)
	}
	// After a lasting drop in RTT the long average would hold the old,
	// higher value for minutes and let the limit grow unchecked: pull it
	// down faster.
	if g.long > 2*short {
		g.long *= 0.95
	}
	// App-limited: with less than half the limit in use, a good RTT says
	// nothing about what a larger limit would do.
	if float64(inflight) < g.limit/2 {
		return
	}
	gradient := math.Max(0.5, math.Min(1, g.p.tolerance*g.long/short))
	next := g.limit*gradient + math.Sqrt(g.limit)
	next = smooth.Toward(g.limit, next, g.p.smoothing)
	if gradient == 1 {
		next = math.Max(next, follow(g.p.tolerance, inflight))
	}
	g.limit = clamp(next, g.p.min, g.p.max)
}

// AIMD is an additive-increase, multiplicative-decrease concurrency limit
// (see the package documentation). The zero value is not usable; call
// NewAIMD. Not safe for concurrent use.
type AIMD struct {
	p           params
	limit       int
	minRTT      time.Duration // minimum over the current MinRTTWindow
	prevMinRTT  time.Duration // minimum over the previous one
	windowStart time.Time
}

var _ Limiter = (*AIMD)(nil)

// NewAIMD returns an AIMD limit at its initial value. It panics on an
// out-of-range option (see the package documentation).
func NewAIMD(opts ...Option) *AIMD {
	p := build(opts)
	return &AIMD{p: p, limit: p.initial}
}

// Limit returns the current limit.
func (a *AIMD) Limit() int { return a.limit }

// Threshold returns the RTT above which a window shrinks the limit: the
// fixed threshold, or Tolerance × the minimum RTT of the last one to two
// MinRTTWindows; 0 before the first sample.
func (a *AIMD) Threshold() time.Duration {
	if a.p.threshold > 0 {
		return a.p.threshold
	}
	m := a.minRTT
	if a.prevMinRTT > 0 && (m == 0 || a.prevMinRTT < m) {
		m = a.prevMinRTT
	}
	return time.Duration(float64(m) * a.p.tolerance)
}

// Update feeds one window ending at now.
func (a *AIMD) Update(now time.Time, rtt time.Duration, inflight int) {
	if rtt <= 0 {
		return
	}
	if a.windowStart.IsZero() || now.Sub(a.windowStart) >= a.p.minRTTWindow || now.Before(a.windowStart) {
		a.prevMinRTT, a.minRTT, a.windowStart = a.minRTT, 0, now
	}
	if a.minRTT == 0 || rtt < a.minRTT {
		a.minRTT = rtt
	}
	switch th := a.Threshold(); {
	case rtt > th:
		a.limit = int(clamp(math.Floor(float64(a.limit)*a.p.backoff), a.p.min, a.p.max))
	case 2*inflight >= a.limit:
		a.limit = int(clamp(math.Max(float64(a.limit+1), follow(a.p.tolerance, inflight)), a.p.min, a.p.max))
	}
}
