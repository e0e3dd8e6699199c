package proxy

import (
	"math"
	"time"
)

// window is what the request path observed of one backend over one sample
// window: the input of adaptiveLimit.step.
type window struct {
	// n counts the attempts answered normally (not an overload answer,
	// not a failure): the latency samples.
	n int
	// rtt is their mean time to response headers. Overload answers and
	// failures are left out: a backend that rejects or fails in a
	// millisecond would otherwise teach the limit a baseline its real
	// answers never meet.
	rtt time.Duration
	// peak is the most requests in flight at once during the window.
	peak int
	// overload counts the attempts that said "overloaded": a 503, a 504,
	// or no answer within the response-header timeout.
	overload int
}

// limitParams are the adaptive limit's parameters (the limit section of
// the configuration, in the form step reads).
type limitParams struct {
	initial, min, max int
	tolerance         float64
	backoff           float64
	probeEvery        time.Duration
	probeShare        float64
}

// adaptiveLimit is one backend's adaptive concurrency limit: how many
// requests the proxy keeps in flight to it at most. It is learned from the
// backend's latency and overload answers only, so it works for backends
// that report no load.
//
// The baseline is the backend's no-queue latency: the lowest window mean
// seen. While a window's mean stays within Tolerance of it the limit grows
// by about √limit (and at once to Tolerance × the peak in flight, as the
// limit package's limiters do); above it the limit shrinks in proportion
// (never below half per window); an overload answer or a timeout backs it
// off by Backoff. At equilibrium the backend keeps a short standing queue
// (its latency Tolerance × the baseline): fully used, never swamped.
//
// Why not limit.Gradient or limit.AIMD as they are: both take their
// baseline from the latency they see, the Gradient from a long average, the
// AIMD from a windowed minimum. In front of a backend that is saturated for
// minutes every request queues, the baseline creeps up with the queue, and
// the limit ratchets up with it (TestLimitNoRatchet measures both). Here the
// baseline only falls on evidence, and when it has not been confirmed for
// probeEvery while the backend was saturated, a probe pins the limit at
// probeShare of itself until the requests sent before have drained, and
// takes the next window's latency, measured without a queue, as the
// baseline. A backend that really became slower gets its new baseline from
// the probe.
//
// Not safe for concurrent use: the proxy's control loop owns it.
type adaptiveLimit struct {
	p      limitParams
	limit  float64
	base   time.Duration // no-queue latency; 0 before the first window
	seenAt time.Time     // when a window last confirmed base
	phase  probePhase
	saved  float64 // the limit before a probe
}

type probePhase uint8

const (
	probeOff     probePhase = iota
	probeDrain              // pinned low, waiting for the old requests to end
	probeMeasure            // pinned low, the next window is the baseline
)

func newAdaptiveLimit(p limitParams) *adaptiveLimit {
	return &adaptiveLimit{p: p, limit: float64(p.initial)}
}

// value returns the limit in force: during a probe, the pinned value.
func (l *adaptiveLimit) value() int {
	if l.phase != probeOff {
		return l.pinned()
	}
	return int(l.limit)
}

func (l *adaptiveLimit) pinned() int {
	return max(l.p.min, int(math.Ceil(l.saved*l.p.probeShare)))
}

// probing reports whether a probe is under way.
func (l *adaptiveLimit) probing() bool { return l.phase != probeOff }

// reset forgets everything learned: a backend that restarted or comes back
// from an ejection is a new backend.
func (l *adaptiveLimit) reset() { *l = adaptiveLimit{p: l.p, limit: float64(l.p.initial)} }

// setParams changes the parameters (a reload), keeping what was learned
// within the new bounds.
func (l *adaptiveLimit) setParams(p limitParams) {
	l.p = p
	l.limit = clampLimit(l.limit, p)
	l.saved = clampLimit(l.saved, p)
}

func clampLimit(x float64, p limitParams) float64 {
	return math.Max(float64(p.min), math.Min(float64(p.max), x))
}

// step feeds one window ending at now. cap is the most the backend was
// allowed in flight besides the limit (a slow start's share); a window
// that used less than half of min(limit, cap) says nothing about a larger
// limit.
func (l *adaptiveLimit) step(now time.Time, w window, cap int) {
	if w.overload > 0 && l.phase == probeOff {
		l.limit = clampLimit(l.limit*l.p.backoff, l.p)
		return
	}
	if w.n <= 0 || w.rtt <= 0 {
		return
	}
	if l.base == 0 || w.rtt < l.base {
		l.base, l.seenAt = w.rtt, now
	} else if float64(w.rtt) <= 1.1*float64(l.base) {
		l.seenAt = now
	}
	if l.phase != probeOff {
		l.stepProbe(now, w)
		return
	}
	used := min(int(l.limit), cap)
	if 2*w.peak < used {
		return // app-limited
	}
	ratio := l.p.tolerance * float64(l.base) / float64(w.rtt)
	if ratio >= 1 {
		next := l.limit + math.Sqrt(l.limit)
		next = math.Max(next, math.Ceil(l.p.tolerance*float64(w.peak)))
		l.limit = clampLimit(next, l.p)
	} else {
		l.limit = clampLimit(l.limit*math.Max(0.5, ratio), l.p)
	}
	// A saturated backend whose baseline nobody confirmed for a while:
	// measure it again without a queue.
	if l.p.probeEvery > 0 && now.Sub(l.seenAt) >= l.p.probeEvery && now.After(l.seenAt) {
		l.phase, l.saved = probeDrain, l.limit
	}
}

func (l *adaptiveLimit) stepProbe(now time.Time, w window) {
	switch l.phase {
	case probeDrain:
		if w.peak <= l.pinned() {
			l.phase = probeMeasure
		}
	case probeMeasure:
		if w.peak > l.pinned() {
			return // not drained after all: measure the next window
		}
		if w.overload == 0 {
			l.base = w.rtt
		}
		l.seenAt, l.phase, l.limit = now, probeOff, l.saved
	}
}
