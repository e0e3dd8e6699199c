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
	// load is the backend's own report (Levee-Load, 1 = at its target),
	// when it gave a recent one; -1 otherwise.
	load float64
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
// seen, or what the last probe measured. While a window's mean stays at it
// (no queue at all) the limit grows by a quarter per round trip; within
// Tolerance of it, by √limit; above it the limit shrinks in proportion
// (never below half at once); an overload answer or a timeout backs it off
// by Backoff. After each change the limit holds for one round trip, so
// that it judges its own effect rather than act again on latencies of
// requests sent before it. At equilibrium the backend keeps a short
// standing queue (its latency about Tolerance × the baseline): fully used,
// never swamped.
//
// An overload answer also marks a ceiling: the in-flight count at which
// the backend said no. For ceilingMemory the limit grows up to one below
// it, not into it again; after that, by one per round trip past it.
//
// A latency seen while the backend queues is no baseline, and in front of
// a saturated backend every request queues. So every probeEvery (jittered
// per backend) while the backend is in use, and one second after a probe
// that found the baseline lower than believed, a probe pins the limit at
// probeShare of itself until the requests sent before have drained, and
// takes the next window's mean, measured without a queue, as the baseline
// (higher or lower: a backend that really became slower gets its new
// baseline from it). Successive probes converge on the no-queue latency
// even when the first limit was far above the backend's workers.
//
// Why not limit.Gradient or limit.AIMD as they are: both take their
// baseline from the latency they see, the Gradient from a long average,
// the AIMD from a windowed minimum; in front of a backend saturated for
// minutes the baseline creeps up with the queue they cause, and the limit
// ratchets up with it (TestLimitNoRatchet measures both).
//
// Not safe for concurrent use: the proxy's control loop owns it.
type adaptiveLimit struct {
	p      limitParams
	jitter float64 // this backend's factor on probeEvery, in [0.8, 1.2]
	limit  float64
	base   time.Duration // no-queue latency; 0 before the first window
	hold   time.Time     // no change before (one round trip after the last)
	next   time.Time     // the next probe
	phase  probePhase
	saved  float64 // the limit before the probe
	skip   bool    // ignore the next window (the probe just ended)
	// ceiling is the in-flight count at which the backend last said it
	// was overloaded (0: none), at ceilingAt.
	ceiling   float64
	ceilingAt time.Time
}

type probePhase uint8

const (
	probeOff     probePhase = iota
	probeDrain              // pinned low, waiting for the old requests to end
	probeMeasure            // pinned low, the next window is the baseline
)

func newAdaptiveLimit(p limitParams, jitter float64) *adaptiveLimit {
	return &adaptiveLimit{p: p, jitter: jitter, limit: float64(p.initial)}
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
func (l *adaptiveLimit) reset() {
	*l = adaptiveLimit{p: l.p, jitter: l.jitter, limit: float64(l.p.initial)}
}

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
	if (w.overload > 0 || w.load > 1) && l.phase == probeOff {
		// The backend rejected, timed out, or says it is past its
		// target: back off from what it had, not from a limit it did not
		// use.
		if now.Before(l.hold) {
			return
		}
		l.limit = clampLimit(math.Min(l.limit, float64(max(w.peak, 1)))*l.p.backoff, l.p)
		l.hold = now.Add(max(w.rtt, l.base))
		l.ceiling, l.ceilingAt = float64(max(w.peak, 1)), now
		return
	}
	if w.n <= 0 || w.rtt <= 0 {
		return
	}
	prev := l.base
	if l.base == 0 || w.rtt < l.base {
		l.base = w.rtt
	}
	if l.phase != probeOff {
		l.stepProbe(now, w, prev)
		return
	}
	if now.Before(l.hold) {
		return
	}
	if l.skip {
		// The first window after a probe mixes in the probe's quick
		// answers.
		l.skip = false
		return
	}
	used := min(int(l.limit), cap)
	if 2*w.peak < used {
		return // app-limited
	}
	switch ratio := l.p.tolerance * float64(l.base) / float64(w.rtt); {
	case ratio >= 1 && w.load >= loadHeadroom:
		// A levee backend near its target: hold (it sheds before its
		// latency shows a queue, so latency alone would grow the limit
		// into its rejections).
	case ratio >= 1:
		next := l.limit + math.Sqrt(l.limit)
		if float64(w.rtt) <= 1.1*float64(l.base) {
			next = l.limit * growth // no queue at all
		}
		l.limit = clampLimit(l.belowCeiling(now, next), l.p)
	default:
		if int(l.limit) <= l.p.min {
			// Too slow even at the floor: the baseline is stale (the
			// backend became slower). Measure it now.
			l.next = now
		}
		l.limit = clampLimit(l.limit*math.Max(0.5, ratio), l.p)
	}
	l.hold = now.Add(w.rtt)
	if l.p.probeEvery > 0 && !now.Before(l.next) {
		l.phase, l.saved = probeDrain, l.limit
	}
}

// ceilingMemory is how long the in-flight count at which a backend said
// it was overloaded stays a ceiling: below it the limit grows as usual,
// up to it; past the memory it grows by one per round trip beyond it, so
// that a backend that gained capacity gets more again.
const ceilingMemory = 10 * time.Second

// belowCeiling returns next, kept under the last overload's ceiling.
func (l *adaptiveLimit) belowCeiling(now time.Time, next float64) float64 {
	if l.ceiling <= 0 || next < l.ceiling {
		return next
	}
	if now.Sub(l.ceilingAt) < ceilingMemory {
		return math.Max(l.limit, l.ceiling-1)
	}
	return math.Max(l.limit, math.Min(next, l.limit+1))
}

// loadHeadroom is the reported load from which the limit stops growing.
const loadHeadroom = 0.9

// growth is the limit's growth per round trip while the backend answers
// at its no-queue latency: a traffic step reaches a limit of 200 from 20
// in about ten round trips.
const growth = 1.25

// stepProbe steps a probe; prev is the baseline before this window.
func (l *adaptiveLimit) stepProbe(now time.Time, w window, prev time.Duration) {
	switch l.phase {
	case probeDrain:
		if w.peak <= l.pinned() {
			l.phase = probeMeasure
		}
	case probeMeasure:
		if w.peak > l.pinned() {
			return // not drained after all: measure the next window
		}
		every := time.Duration(float64(l.p.probeEvery) * l.jitter)
		if w.overload == 0 {
			if float64(w.rtt) < 0.9*float64(prev) || l.next.IsZero() {
				every = time.Second // the first probe, or a queue was hiding the baseline: look again soon
			}
			l.base = w.rtt
		}
		l.next, l.phase, l.limit = now.Add(every), probeOff, l.saved
		l.skip = true
	}
}
