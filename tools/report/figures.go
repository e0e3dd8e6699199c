package report

import (
	"math"
	"slices"
)

// Tally counts the outcomes of the requests offered over a span: what a
// generator or a simulator accumulates before it becomes Rates. Every
// offered request ends in exactly one of Goodput, Rejected, Throttled and
// Failed (a tool's own failures, such as a generator's, count as Failed).
type Tally struct {
	Offered   int64 `json:"offered"`
	Attempted int64 `json:"attempted"`
	Throttled int64 `json:"throttled"`
	Goodput   int64 `json:"goodput"`
	Rejected  int64 `json:"rejected"`
	Failed    int64 `json:"failed"`
}

// Add adds u's counts to t.
func (t *Tally) Add(u Tally) {
	t.Offered += u.Offered
	t.Attempted += u.Attempted
	t.Throttled += u.Throttled
	t.Goodput += u.Goodput
	t.Rejected += u.Rejected
	t.Failed += u.Failed
}

// Rates returns t per second of a span of seconds, rounded (Round); zeros
// for a span that is not positive.
func (t Tally) Rates(seconds float64) Rates {
	if !(seconds > 0) {
		return Rates{}
	}
	r := func(n int64) float64 { return Round(float64(n) / seconds) }
	return Rates{
		OfferedRPS: r(t.Offered), AttemptedRPS: r(t.Attempted), ThrottledRPS: r(t.Throttled),
		GoodputRPS: r(t.Goodput), RejectedRPS: r(t.Rejected), FailedRPS: r(t.Failed),
	}
}

// SeriesOf returns the client-side Series of per-bucket tallies, buckets
// of bucketS seconds.
func SeriesOf(ts []Tally, bucketS float64) Series {
	s := Series{BucketS: Round(bucketS)}
	n := len(ts)
	s.OfferedRPS, s.AttemptedRPS, s.ThrottledRPS = make([]float64, n), make([]float64, n), make([]float64, n)
	s.GoodputRPS, s.RejectedRPS, s.FailedRPS = make([]float64, n), make([]float64, n), make([]float64, n)
	for i, t := range ts {
		r := t.Rates(bucketS)
		s.OfferedRPS[i], s.AttemptedRPS[i], s.ThrottledRPS[i] = r.OfferedRPS, r.AttemptedRPS, r.ThrottledRPS
		s.GoodputRPS[i], s.RejectedRPS[i], s.FailedRPS[i] = r.GoodputRPS, r.RejectedRPS, r.FailedRPS
	}
	return s
}

// PerSecond converts per-bucket counts into per-second rates, buckets of
// bucketS seconds.
func PerSecond(counts []int64, bucketS float64) []float64 {
	out := make([]float64, len(counts))
	if !(bucketS > 0) {
		return out
	}
	for i, n := range counts {
		out[i] = Round(float64(n) / bucketS)
	}
	return out
}

// The constants of DESIGN.md's derived figures.
const (
	// RecoveryShare of the pre-trigger goodput must be back for
	// RecoveryHoldS seconds in a row; the pre-trigger goodput is the mean
	// over the PreTriggerS seconds before the trigger phase.
	RecoveryShare = 0.95
	RecoveryHoldS = 3.0
	PreTriggerS   = 10.0
	// OutageShare: a bucket whose goodput is below this share of its
	// offered load is an outage.
	OutageShare = 0.1
)

// Recovery is recovery_s of DESIGN.md: the seconds from the end of the
// trigger phase (trigEnd, seconds from the start of s) until goodput is at
// least RecoveryShare of the pre-trigger goodput in each of RecoveryHoldS
// consecutive seconds; the pre-trigger goodput is the mean over the up to
// PreTriggerS seconds before the trigger phase starts (trigStart). It
// returns nil if goodput never comes back within s, or if s has no bucket
// before trigStart.
func Recovery(s Series, trigStart, trigEnd float64) *float64 {
	if !(s.BucketS > 0) {
		return nil
	}
	b1 := bucketAt(trigStart, s.BucketS)
	b0 := max(0, b1-int(PreTriggerS/s.BucketS+1e-9))
	b1 = min(b1, len(s.GoodputRPS))
	if b1 <= b0 {
		return nil
	}
	var pre float64
	for _, g := range s.GoodputRPS[b0:b1] {
		pre += g
	}
	pre /= float64(b1 - b0)
	d, ok := Sustained(s.GoodputRPS, s.BucketS, trigEnd, RecoveryHoldS, RecoveryShare*pre)
	if !ok {
		return nil
	}
	return &d
}

// Sustained returns how long after from (seconds from the start of the
// series) the rate first stays at or above want in each whole second of a
// stretch of hold seconds, stepping by one bucket, and whether it ever
// does within the series. rates has one value per bucket of bucketS
// seconds; a second is the mean over the buckets that make it up (one
// bucket when buckets are a second or longer). The result is rounded
// (Round) and never negative.
func Sustained(rates []float64, bucketS, from, hold, want float64) (float64, bool) {
	return stretch(len(rates), bucketS, from, hold, func(lo, hi int) bool {
		var s float64
		for _, r := range rates[lo:hi] {
			s += r
		}
		return s/float64(hi-lo) >= want
	})
}

// SustainedShare is Sustained for a share: each second of the stretch
// must have some whole and part ≥ share × whole (summed over the second's
// buckets).
func SustainedShare(part, whole []float64, bucketS, from, hold, share float64) (float64, bool) {
	n := min(len(part), len(whole))
	return stretch(n, bucketS, from, hold, func(lo, hi int) bool {
		var p, w float64
		for i := lo; i < hi; i++ {
			p += part[i]
			w += whole[i]
		}
		return w > 0 && p >= share*w
	})
}

// stretch is the rule of Sustained: the first bucket i ≥ the one holding
// from such that ok holds for each of the whole seconds [lo, hi) (bucket
// indexes) of a stretch of hold seconds starting at i, within n buckets.
func stretch(n int, bucketS, from, hold float64, ok func(lo, hi int) bool) (float64, bool) {
	if !(bucketS > 0) {
		return 0, false
	}
	per := max(1, int(math.Round(1/bucketS)))
	windows := max(1, int(math.Ceil(hold/(float64(per)*bucketS)-1e-9)))
	for i := max(0, bucketAt(from, bucketS)); i+windows*per <= n; i++ {
		good := true
		for k := 0; k < windows && good; k++ {
			good = ok(i+k*per, i+(k+1)*per)
		}
		if good {
			return max(0, Round(float64(i)*bucketS-from)), true
		}
	}
	return 0, false
}

// Outage is outage_s of DESIGN.md: the seconds of s whose goodput is below
// OutageShare of the offered load (buckets with nothing offered are not
// counted).
func Outage(s Series) float64 {
	var n int
	for i, o := range s.OfferedRPS {
		if o > 0 && i < len(s.GoodputRPS) && s.GoodputRPS[i] < OutageShare*o {
			n++
		}
	}
	return Round(float64(n) * s.BucketS)
}

// BestSecond returns the highest mean rate over any whole second of rates
// (one value per bucket of bucketS seconds), or the mean of the whole
// series if it is shorter than a second: the peak a saturated service
// reached, closest to what it can do with its CPU to itself on a shared
// machine.
func BestSecond(rates []float64, bucketS float64) float64 {
	if len(rates) == 0 || !(bucketS > 0) {
		return 0
	}
	per := max(1, int(math.Round(1/bucketS)))
	if len(rates) < per {
		var s float64
		for _, r := range rates {
			s += r
		}
		return s / float64(len(rates))
	}
	var best, s float64
	for i, r := range rates {
		s += r
		if i >= per {
			s -= rates[i-per]
		}
		if i >= per-1 {
			best = max(best, s/float64(per))
		}
	}
	return best
}

// Share returns part ÷ whole rounded (Round), or 0 when whole is not
// positive: the wasted-work and rejecting-CPU shares.
func Share(part, whole float64) float64 {
	if !(whole > 0) {
		return 0
	}
	return Round(part / whole)
}

// Median returns the median of xs (the mean of the middle two for an even
// count) and the spread as min and max; zeros for none. Reports of
// repeated runs state medians with their spread; durations (CPU per
// request, latencies) are taken as they are.
func Median[T ~float64 | ~int64](xs []T) (med, lo, hi T) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}

// Round rounds x to 3 decimals, the precision of every figure in a
// report, so that the same run encodes to the same bytes; NaN and ±Inf
// (which JSON cannot carry) become 0.
func Round(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

// RoundSeconds rounds a latency of x seconds to the microsecond (Round's
// three decimals would erase sub-millisecond latencies); NaN and ±Inf
// become 0.
func RoundSeconds(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1e6) / 1e6
}

// bucketAt is the index of the bucket holding time t (seconds), tolerant
// of the rounding of t.
func bucketAt(t, bucketS float64) int {
	return int(math.Floor(t/bucketS + 1e-9))
}

// FitLine fits y = a + b·x by least squares; with a single point it
// passes through the origin. ok is false without points or without
// spread in x.
func FitLine(xs, ys []float64) (a, b float64, ok bool) {
	n := float64(len(xs))
	switch len(xs) {
	case 0:
		return 0, 0, false
	case 1:
		if xs[0] == 0 {
			return 0, 0, false
		}
		return 0, ys[0] / xs[0], true
	}
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
		sxx += xs[i] * xs[i]
		sxy += xs[i] * ys[i]
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0, 0, false
	}
	b = (n*sxy - sx*sy) / d
	a = (sy - b*sx) / n
	return a, b, true
}
