package loopback

import (
	"math"
	"sort"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loadgen"
)

// PhaseReport is one phase in the vocabulary of levee's reports
// (DESIGN.md, "Report vocabulary"); rates are per second of the phase.
type PhaseReport struct {
	Name         string  `json:"name"`
	OfferedRPS   float64 `json:"offered_rps"`
	AttemptedRPS float64 `json:"attempted_rps"`
	ThrottledRPS float64 `json:"throttled_rps"`
	GoodputRPS   float64 `json:"goodput_rps"`
	RejectedRPS  float64 `json:"rejected_rps"`
	FailedRPS    float64 `json:"failed_rps"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
}

// Phases converts a generator report to the report vocabulary. Generator
// errors count as failures here; Result.GenErrors tells them apart.
func Phases(r *loadgen.Report) []PhaseReport {
	out := make([]PhaseReport, 0, len(r.Phases))
	for _, p := range r.Phases {
		out = append(out, PhaseReport{
			Name:         p.Name,
			OfferedRPS:   round(p.Rate(p.Offered), 1),
			AttemptedRPS: round(p.Rate(p.Attempted), 1),
			ThrottledRPS: round(p.Rate(p.Throttled), 1),
			GoodputRPS:   round(p.Rate(p.Goodput), 1),
			RejectedRPS:  round(p.Rate(p.Rejected), 1),
			FailedRPS:    round(p.Rate(p.Failed+p.GenErrors), 1),
			P50ms:        round(ms(p.P50), 2),
			P99ms:        round(ms(p.P99), 2),
		})
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// firstSustained returns the first offset t ≥ from (stepping by res) such
// that every whole second in [t, t+hold) has rate(window) ≥ want, with the
// windows ending by until; -1 if there is none. rate sums a series over
// [i, j) bucket indices and returns events per second.
func firstSustained(series []int64, res time.Duration, from, until, hold time.Duration, want float64) time.Duration {
	per := int(time.Second / res)
	perSec := func(i int) float64 {
		var n int64
		for k := i; k < i+per; k++ {
			if k >= 0 && k < len(series) {
				n += series[k]
			}
		}
		return float64(n)
	}
	for t := from; t+hold <= until; t += res {
		ok := true
		for w := time.Duration(0); w < hold; w += time.Second {
			if perSec(int((t+w)/res)) < want {
				ok = false
				break
			}
		}
		if ok {
			return t - from
		}
	}
	return -1
}

// ClientRecovery is recovery_s of DESIGN.md: the time from the end of the
// trigger phase until goodput (by scheduled time) is back to ≥ 95% of the
// pre-trigger phase's goodput for 3 consecutive seconds, looking no
// further than the end of the phases; ok is false if it never is.
func ClientRecovery(r *loadgen.Report, pre, trigger int) (seconds float64, ok bool) {
	p := r.Phases[pre]
	want := 0.95 * p.Rate(p.Goodput)
	s := make([]int64, len(r.Series))
	for i, b := range r.Series {
		s[i] = b.Goodput
	}
	tp := r.Phases[trigger]
	last := r.Phases[len(r.Phases)-1]
	d := firstSustained(s, r.Resolution, tp.Offset+tp.Duration, last.Offset+last.Duration, 3*time.Second, want)
	if d < 0 {
		return 0, false
	}
	return round(d.Seconds(), 1), true
}

// ServerRecovery is the time from the end of the trigger phase until the
// backend answers ≥ 95% of the following phase's offered load in time (2xx
// before the client's deadline, by completion time) for hold seconds
// (shortened to what the phase has left); ok is false if it never does.
func ServerRecovery(res *Result, trigger int, hold time.Duration) (seconds float64, ok bool) {
	lr, sr := res.Load, res.Server.Series
	if trigger+1 >= len(lr.Phases) || sr.Resolution <= 0 {
		return 0, false
	}
	next := lr.Phases[trigger+1]
	want := 0.95 * next.Rate(next.Offered)
	// Align the backend's series to the generator's clock.
	shift := int(lr.Start.Sub(sr.Start) / sr.Resolution)
	s := make([]int64, 0, len(sr.OK))
	for i := shift; i < len(sr.OK); i++ {
		if i < 0 {
			s = append(s, 0)
			continue
		}
		s = append(s, sr.OK[i]-sr.OKLate[i])
	}
	from := next.Offset
	until := next.Offset + next.Duration
	h := min(hold, (until-from)/time.Second*time.Second-time.Second)
	if h < time.Second {
		h = time.Second
	}
	d := firstSustained(s, sr.Resolution, from, until, h, want)
	if d < 0 {
		return 0, false
	}
	return round(d.Seconds(), 1), true
}

// ServerHealthy is the time from the end of the trigger phase until the
// backend, for hold seconds in a row (shortened to what the next phase has
// left), answers ≥ 95% of the requests that reach it with a 2xx before
// their client's deadline, whatever their number: a client that throttles
// itself sends less than the offered load, and ServerRecovery would blame
// the server for it. ok is false if that never happens.
func ServerHealthy(res *Result, trigger int, hold time.Duration) (seconds float64, ok bool) {
	lr, sr := res.Load, res.Server.Series
	if trigger+1 >= len(lr.Phases) || sr.Resolution <= 0 {
		return 0, false
	}
	shift := int(lr.Start.Sub(sr.Start) / sr.Resolution)
	at := func(xs []int64, i int) int64 {
		if i += shift; i >= 0 && i < len(xs) {
			return xs[i]
		}
		return 0
	}
	per := int(time.Second / sr.Resolution)
	healthy := func(from int) bool {
		var good, all int64
		for i := from; i < from+per; i++ {
			good += at(sr.OK, i) - at(sr.OKLate, i)
			all += at(sr.OK, i) + at(sr.Rejected, i) + at(sr.Other, i)
		}
		return all > 0 && float64(good) >= 0.95*float64(all)
	}
	next := lr.Phases[trigger+1]
	from, until := next.Offset, next.Offset+next.Duration
	h := min(hold, (until-from)/time.Second*time.Second-time.Second)
	if h < time.Second {
		h = time.Second
	}
	for t := from; t+h <= until; t += sr.Resolution {
		ok := true
		for w := time.Duration(0); w < h; w += time.Second {
			if !healthy(int((t + w) / sr.Resolution)) {
				ok = false
				break
			}
		}
		if ok {
			return round((t - from).Seconds(), 1), true
		}
	}
	return 0, false
}

// LateShare is the share of the backend's handler runs that finished after
// their client's deadline: work done for nobody.
func LateShare(s backend.Series) float64 {
	var runs, late int64
	for i := range s.Runs {
		runs += s.Runs[i]
		late += s.Late[i]
	}
	if runs == 0 {
		return 0
	}
	return float64(late) / float64(runs)
}

// PeakServed is the highest in-time 2xx rate the backend reached over any
// whole second of the run.
func PeakServed(s backend.Series) float64 {
	per := int(time.Second / s.Resolution)
	best := 0.0
	for i := 0; i+per <= len(s.OK); i++ {
		var n int64
		for k := i; k < i+per; k++ {
			n += s.OK[k] - s.OKLate[k]
		}
		best = max(best, float64(n))
	}
	return best
}

// Median returns the median of xs (the mean of the middle two for an even
// count) and its spread as min and max; zeros for none.
func Median(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		med = s[n/2]
	} else {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return med, s[0], s[n-1]
}
