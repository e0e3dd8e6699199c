// Package limit provides adaptive concurrency limits (work in progress).
package limit

import "time"

// Limiter is an adaptive concurrency limit. Update is called once per
// sample window with the window's round-trip time and peak in-flight count.
type Limiter interface {
	Limit() int
	Update(now time.Time, rtt time.Duration, inflight int)
}

// Gradient is a gradient-based adaptive limit.
type Gradient struct{ limit int }

// GradientOption configures a Gradient.
type GradientOption func(*Gradient)

// NewGradient returns a Gradient limit.
func NewGradient(opts ...GradientOption) *Gradient {
	g := &Gradient{limit: 20}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Limit returns the current limit.
func (g *Gradient) Limit() int { return g.limit }

// Update feeds one sample window.
func (g *Gradient) Update(now time.Time, rtt time.Duration, inflight int) {}

// AIMD is an additive-increase multiplicative-decrease limit.
type AIMD struct{ limit int }

// AIMDOption configures an AIMD.
type AIMDOption func(*AIMD)

// NewAIMD returns an AIMD limit.
func NewAIMD(opts ...AIMDOption) *AIMD {
	a := &AIMD{limit: 20}
	for _, o := range opts {
		o(a)
	}
	return a
}

// Limit returns the current limit.
func (a *AIMD) Limit() int { return a.limit }

// Update feeds one sample window.
func (a *AIMD) Update(now time.Time, rtt time.Duration, inflight int) {}
