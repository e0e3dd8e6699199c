package overload

import (
	"math"
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

// flight is the record of the requests in flight seen at each step, so
// that a measurement can be paired with the requests that were in flight
// while it may have been taken.
type flight struct {
	hist  [histLen]int64
	steps int
}

// histLen is how many steps flight remembers: 6.4 s at the default
// period, beyond the longest a measurement waits for a forced
// collection.
const histLen = 64

func (f *flight) push(n int64) {
	f.hist[f.steps%histLen] = n
	f.steps++
}

// mean returns the mean of the requests in flight seen from step from (a
// count of pushes) to the latest; a window older than the record is cut
// to it.
func (f *flight) mean(from int) float64 {
	var sum, k float64
	for i := max(from, f.steps-histLen, 0); i < f.steps; i++ {
		sum += float64(f.hist[i%histLen])
		k++
	}
	if k == 0 {
		return 0
	}
	return sum / k
}

// track is what the InFlight action learns of one resource with a Goal:
// the line that relates its reading to the requests in flight,
//
//	reading ≈ base + share × requests in flight
//
// from the reading and the requests averaged over about a second (means
// of one window, so that they correspond even though the reading lags:
// the live heap is measured by each garbage collection), a low point (the
// settled moment with the fewest requests over ten minutes, the latest
// among equals: often the idle start, or a lull), and the slope between
// the two. Points are taken only while the averages are settled (the
// one-second means agree with quarter-second ones): while the requests move,
// a lagging reading paired with them would give any slope. It also keeps
// when the resource was last measured (Reading.Cycle), for the Collect
// action.
type track struct {
	init       bool
	n, v       float64 // the one-second averages
	nf, vf     float64 // the quarter-second ones
	share      float64 // the share of one request, held against transients; 0 unknown
	lows       [lowBuckets]low
	cycle      uint64
	renewed    bool
	renewAt    time.Time
	renew      int // the step at which the latest measurement was first seen
	prevRenew  int // the one before
	lastUpdate time.Time
}

// low is the settled point with the fewest requests of a bucket of
// lowSpan.
type low struct {
	epoch int64
	v, n  float64
	ok    bool
}

const (
	lowBuckets = 10
	lowSpan    = time.Minute
	// avgTau is the averaging time of the readings and the requests;
	// they are settled when a quarter-second average (fastTau) agrees.
	avgTau  = time.Second
	fastTau = 250 * time.Millisecond
	// shareTau is how fast a learned share falls to a lower estimate; it
	// rises at once.
	shareTau = 5 * time.Second
	// spreadMin is the fewest requests, on average, between the low point
	// and now for their slope to say what a request costs (also at least a
	// quarter of the requests now).
	spreadMin = 4
)

// see notes the reading r at now, step step: a new Cycle is a new
// measurement.
func (t *track) see(r Reading, now time.Time, step int) {
	if r.Cycle == 0 || (t.renewed && r.Cycle == t.cycle) {
		return
	}
	t.prevRenew = t.renew
	if !t.renewed {
		t.prevRenew = 0 // never seen before: the whole record
	}
	t.cycle, t.renewAt, t.renew, t.renewed = r.Cycle, now, step, true
}

// window returns the first step whose requests in flight the latest
// reading r may have seen: for a resource measured at every sample, the
// previous step; for one measured by garbage collections, the step
// before the previous measurement was first seen (its sampler may still
// be showing that one).
func (t *track) window(r Reading, steps int) int {
	if r.Cycle == 0 {
		return steps - 2
	}
	return t.prevRenew - 1
}

// stale reports whether the resource's latest measurement is older than
// d at now (never for a resource measured at every sample).
func (t *track) stale(r Reading, now time.Time, d time.Duration) bool {
	return r.Cycle != 0 && t.renewed && now.Sub(t.renewAt) >= d
}

// update adds a step's reading v with n requests in flight at now.
func (t *track) update(v float64, n int64, now time.Time) {
	if math.IsNaN(v) {
		return
	}
	fn := float64(max(n, 0))
	dt := now.Sub(t.lastUpdate)
	switch {
	case !t.init:
		t.n, t.v, t.nf, t.vf, t.init = fn, v, fn, v, true
	case dt <= 0:
		return // a step at the same time, or a clock that went back
	default:
		a, af := smooth.Alpha(dt, avgTau), smooth.Alpha(dt, fastTau)
		t.n, t.v = smooth.Toward(t.n, fn, a), smooth.Toward(t.v, v, a)
		t.nf, t.vf = smooth.Toward(t.nf, fn, af), smooth.Toward(t.vf, v, af)
	}
	t.lastUpdate = now
	if !t.settled() {
		return
	}
	e := now.UnixNano() / int64(lowSpan)
	b := &t.lows[uint64(e)%lowBuckets]
	if !b.ok || b.epoch != e || t.n <= b.n+0.5 {
		*b = low{epoch: e, v: t.v, n: t.n, ok: true}
	}
	if s, known := shareOf(t.v, t.n, t.lowest(now)); known {
		if t.share == 0 || s >= t.share || dt <= 0 {
			t.share = s
		} else {
			t.share = smooth.Toward(t.share, s, smooth.Alpha(dt, shareTau))
		}
	}
}

// settled reports whether the one-second averages agree with the
// quarter-second ones: the requests within a tenth, or within their own
// noise (the square root of their number, as for arrivals at random), and
// the reading within as much (at the learned share per request, or the
// reading's average per request while none is learned), or 0.02.
func (t *track) settled() bool {
	tol := max(1, 0.1*t.n, math.Sqrt(t.n))
	share := t.share
	if share == 0 {
		share = t.v / max(t.n, 1)
	}
	return math.Abs(t.n-t.nf) <= tol && math.Abs(t.v-t.vf) <= max(0.02, tol*share)
}

// lowest returns the recent settled point with the fewest requests.
func (t *track) lowest(now time.Time) low {
	e := now.UnixNano() / int64(lowSpan)
	var out low
	for _, b := range t.lows {
		if b.ok && b.epoch > e-lowBuckets && b.epoch <= e && (!out.ok || b.n < out.n-0.5 || (b.n <= out.n+0.5 && b.epoch > out.epoch)) {
			out = b
		}
	}
	return out
}

// shareOf is the estimate of the share of the resource one request
// holds, from the averages v with n requests and the low point lo: the
// slope from lo when the requests have moved enough since, bounded above
// by v ÷ n (all of the reading held by the requests) and below by an
// eighth of that (a low point from before other memory was freed cannot
// make the estimate reckless). It reports false, saying nothing, when
// the requests have not moved enough or too few are in flight to tell.
func shareOf(v, n float64, lo low) (float64, bool) {
	if n < spreadMin || !lo.ok || !(v > lo.v) {
		return 0, false
	}
	dn := n - lo.n
	if dn < max(spreadMin, n/4) {
		return 0, false
	}
	upper := v / n
	return min(upper, max((v-lo.v)/dn, upper/8)), true
}

// probeRoom is the lowest cap a resource below its goal sets: however
// little the averages say, a few requests may show what they cost.
const probeRoom = 8

// nearGoal is the fraction of its goal from which a resource whose share
// per request is unknown caps the requests in flight: without a slope
// the cap holds the requests near where they are (the reading ÷ the
// requests is an upper bound of the share, so the cap errs low), and a
// resource well below its goal must not be held so.
const nearGoal = 0.9

// capFor is the InFlight stage for one resource: the cap on the requests
// in flight that brings its reading to goal g, from the averages v and n
// and the learned share (0 when unknown); -1 when it sets none: no
// reading, no goal, or a reading below nearGoal of the goal while the
// share is unknown.
//
// The cap is the number of requests at which the line through the
// averages reaches the goal, n + (g − v) ÷ share. It does not depend on
// the requests in flight now: a surge is held at the cap the moment it
// comes, whatever the lag of the reading. The Manager also computes it
// from the latest reading and the mean of the requests in flight while it
// may have been measured, and takes the lower: the one-second averages
// lag a surge, and a reading measured rarely (the live heap, at each
// garbage collection) can sit below them for a second.
func capFor(v, n, share, g float64, minFlight int64) int64 {
	if math.IsNaN(v) || !(g > 0) {
		return -1
	}
	if share <= 0 {
		if v < nearGoal*g {
			return -1
		}
		share = v / max(n, 1)
	}
	c := n + (g-v)/share
	if v < g {
		c = max(c, probeRoom)
	}
	if c >= math.MaxInt64/2 {
		return math.MaxInt64 / 2
	}
	return max(minFlight, int64(math.Floor(c)))
}
