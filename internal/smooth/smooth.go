package smooth

import (
	"math"
	"time"
)

// Alpha returns the weight 1 − exp(−dt/tau) of a sample taken dt after the
// previous one in an exponential average with time constant tau. It is 1
// (no memory: the sample replaces the average) when tau ≤ 0, and 0 (the
// sample counts for nothing) when dt ≤ 0.
func Alpha(dt, tau time.Duration) float64 { return 1 - Decay(dt, tau) }

// Decay returns exp(−dt/tau), the factor by which an exponentially decayed
// sum with time constant tau shrinks over dt: 1 − Alpha(dt, tau). It is 0
// (nothing is remembered) when tau ≤ 0, and 1 when dt ≤ 0.
func Decay(dt, tau time.Duration) float64 {
	switch {
	case tau <= 0:
		return 0
	case dt <= 0:
		return 1
	}
	return math.Exp(-float64(dt) / float64(tau))
}

// Toward returns v moved the fraction alpha of the way to x:
// v + alpha·(x − v). alpha ≥ 1 gives exactly x (whatever v was), alpha 0
// gives v.
func Toward(v, x, alpha float64) float64 {
	if alpha >= 1 {
		return x
	}
	return v + alpha*(x-v)
}

// EWMA is an exponentially weighted moving average with time constant Tau
// (see the package documentation). The first Update takes its sample as
// the average; a Tau ≤ 0 means no smoothing (every Update returns its
// sample). The zero EWMA is ready to use, without smoothing. Not safe for
// concurrent use.
type EWMA struct {
	// Tau is the time constant; set it before the first Update.
	Tau time.Duration

	v  float64
	ok bool
}

// Update adds the sample x taken dt after the previous one and returns the
// new average. A dt ≤ 0 leaves an existing average unchanged.
func (e *EWMA) Update(x float64, dt time.Duration) float64 {
	if !e.ok {
		e.v, e.ok = x, true
		return e.v
	}
	e.v = Toward(e.v, x, Alpha(dt, e.Tau))
	return e.v
}

// Value returns the average, NaN before the first Update.
func (e *EWMA) Value() float64 {
	if !e.ok {
		return math.NaN()
	}
	return e.v
}
