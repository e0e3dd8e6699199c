package load

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Phase is a named segment of the offered-load schedule: arrivals evenly
// spaced at Rate per second for Duration, or, when To is positive, at a
// rate that ramps linearly from Rate to To over Duration. A Rate (and To)
// of 0 is an idle phase.
type Phase struct {
	Name     string        `json:"name"`
	Rate     float64       `json:"rate"`
	To       float64       `json:"to,omitempty"`
	Duration time.Duration `json:"duration"`
}

// Limits are the hard caps of a run, checked before anything is sent: a
// typo in a rate or a duration must not turn into a flood.
type Limits struct {
	// MaxRate is the highest rate any phase may offer, requests per
	// second. Default DefaultMaxRate; at most CeilingRate.
	MaxRate float64
	// MaxDuration is the longest schedule. Default DefaultMaxDuration; at
	// most CeilingDuration.
	MaxDuration time.Duration
}

// The default and the highest hard caps.
const (
	DefaultMaxRate     = 20000
	DefaultMaxDuration = 10 * time.Minute
	CeilingRate        = 200000
	CeilingDuration    = time.Hour
)

// ErrLimits is wrapped by the errors of a schedule beyond its Limits.
var ErrLimits = errors.New("load: beyond the hard caps")

func (l Limits) orDefault() (Limits, error) {
	if l.MaxRate == 0 {
		l.MaxRate = DefaultMaxRate
	}
	if l.MaxDuration == 0 {
		l.MaxDuration = DefaultMaxDuration
	}
	if !(l.MaxRate > 0 && l.MaxRate <= CeilingRate) {
		return l, fmt.Errorf("%w: max rate %v out of (0, %d] requests/s", ErrLimits, l.MaxRate, CeilingRate)
	}
	if l.MaxDuration <= 0 || l.MaxDuration > CeilingDuration {
		return l, fmt.Errorf("%w: max duration %v out of (0, %v]", ErrLimits, l.MaxDuration, CeilingDuration)
	}
	return l, nil
}

// check validates the schedule against l and returns its length.
func check(phases []Phase, l Limits) (time.Duration, error) {
	if len(phases) == 0 {
		return 0, ErrNoPhases
	}
	l, err := l.orDefault()
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for i, p := range phases {
		switch {
		case p.Duration <= 0:
			return 0, fmt.Errorf("load: phase %d (%q): duration %v, want > 0", i, p.Name, p.Duration)
		case !(p.Rate >= 0) || !(p.To >= 0) || math.IsInf(p.Rate, 0) || math.IsInf(p.To, 0):
			return 0, fmt.Errorf("load: phase %d (%q): rate %v → %v, want ≥ 0", i, p.Name, p.Rate, p.To)
		case p.Rate > l.MaxRate || p.To > l.MaxRate:
			return 0, fmt.Errorf("%w: phase %q offers %.0f requests/s, the cap is %.0f", ErrLimits, p.Name, max(p.Rate, p.To), l.MaxRate)
		}
		total += p.Duration
	}
	if total > l.MaxDuration {
		return 0, fmt.Errorf("%w: the schedule lasts %v, the cap is %v", ErrLimits, total, l.MaxDuration)
	}
	return total, nil
}

// arrivals returns the number of arrivals of p.
func (p Phase) arrivals() int {
	r1 := p.Rate
	if p.To > 0 {
		r1 = p.To
	}
	return int((p.Rate + r1) / 2 * p.Duration.Seconds())
}

// at returns the offset from the phase's start of its i-th arrival: the
// time t at which the expected count ∫₀ᵗ rate reaches i.
func (p Phase) at(i int) time.Duration {
	d := p.Duration.Seconds()
	r0, r1 := p.Rate, p.To
	if r1 <= 0 || r1 == r0 {
		return time.Duration(float64(i) / r0 * float64(time.Second))
	}
	// r0·t + (r1−r0)·t²/(2d) = i
	a := (r1 - r0) / (2 * d)
	t := (-r0 + math.Sqrt(r0*r0+4*a*float64(i))) / (2 * a)
	return time.Duration(t * float64(time.Second))
}

// rateAt returns the phase's rate at offset t.
func (p Phase) rateAt(t time.Duration) float64 {
	if p.To <= 0 {
		return p.Rate
	}
	f := min(1, max(0, t.Seconds()/p.Duration.Seconds()))
	return p.Rate + (p.To-p.Rate)*f
}

// Steps returns a staircase from rate from to rate to (both > 0) in n
// steps of d each, the rates growing geometrically, named "step-1" ….
func Steps(from, to float64, n int, d time.Duration) []Phase {
	if n < 1 {
		n = 1
	}
	out := make([]Phase, n)
	for i := range out {
		r := from
		if n > 1 {
			r = from * math.Pow(to/from, float64(i)/float64(n-1))
		}
		out[i] = Phase{Name: fmt.Sprintf("step-%d", i+1), Rate: r, Duration: d}
	}
	return out
}
