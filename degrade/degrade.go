package degrade

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/internal/option"
)

// Level is a degradation level: 0 is normal service, 1..Max progressively
// cheaper service (serve from cache, drop optional sections, skip
// personalisation, ...). What each level means is the application's choice;
// levee only says when to enter it.
type Level int

type levelKey struct{}

// levelBoxes holds one preallocated box per small level so WithLevel does
// not allocate for them.
var levelBoxes = [...]Level{0, 1, 2, 3, 4, 5, 6, 7, 8}

// WithLevel returns a copy of ctx carrying level l. Handlers read it with
// FromContext. It allocates once for the context node only.
func WithLevel(ctx context.Context, l Level) context.Context {
	if l >= 0 && int(l) < len(levelBoxes) {
		return context.WithValue(ctx, levelKey{}, &levelBoxes[l])
	}
	return context.WithValue(ctx, levelKey{}, &l)
}

// FromContext returns the degradation level carried by ctx, 0 if none.
func FromContext(ctx context.Context) Level {
	if p, ok := ctx.Value(levelKey{}).(*Level); ok {
		return *p
	}
	return 0
}

// Default parameters (see the options).
const (
	// DefaultTarget is the load at which level 1 is entered.
	DefaultTarget = 0.85
	// DefaultHysteresis is how far below its entry load a level is left.
	DefaultHysteresis = 0.05
	// DefaultMax is the highest level.
	DefaultMax = Level(3)
	// DefaultHold is how long the load must stay low before a level is left.
	DefaultHold = time.Second
)

// Option configures a Controller. An out-of-range value makes New panic
// (see the package documentation).
type Option func(*Controller)

// WithTarget sets the load (a fraction of the signal target: 1.0 = the load
// at which admit starts shedding) at which level 1 is entered. Default 0.85;
// range (0, 1]; 0 means the default. Levels 2..Max are entered at loads
// spaced evenly between target and 1.0, so every level is reached before
// shedding starts.
func WithTarget(f float64) Option {
	return func(d *Controller) {
		option.Set(&d.target, f, f > 0 && f <= 1, "degrade", "WithTarget", "must be in (0, 1] (0 means the default, 0.85)")
	}
}

// WithHysteresis sets how far (in load units) below a level's entry load the
// load must fall before the level is left. Default 0.05; range [0, 1]; 0
// means none.
func WithHysteresis(h float64) Option {
	return func(d *Controller) {
		option.Check(h >= 0 && h <= 1, "degrade", "WithHysteresis", "must be in [0, 1]", h)
		d.hyst = h
	}
}

// WithMax sets the highest level. Default 3; range [1, 100]; 0 means the
// default.
func WithMax(m Level) Option {
	return func(d *Controller) {
		option.Set(&d.max, m, m >= 1 && m <= 100, "degrade", "WithMax", "must be in [1, 100] (0 means the default, 3)")
	}
}

// WithHold sets how long the load must stay below a level's exit load before
// the level is lowered by one. Default 1s; range [0, 1h]; 0 lowers it at
// the next step. Rising is immediate.
func WithHold(h time.Duration) Option {
	return func(d *Controller) {
		option.Check(h >= 0 && h <= time.Hour, "degrade", "WithHold", "must be in [0, 1h]", h)
		d.hold = h
	}
}

// Controller decides the degradation level from the load (the maximum over
// signals of value ÷ target, as admit.Controller.Load reports it). Level l
// (1..Max) is entered when load ≥ target + (l−1)·(1−target)/Max and left,
// one level at a time, when the load has stayed below that threshold minus
// the hysteresis for the hold time. A forced level (Force) overrides the
// computed one until it expires.
//
// StepAt is meant to be called from one control loop; Level and Force are
// safe for concurrent use. The zero value is not usable: call New.
type Controller struct {
	target, hyst float64
	max          Level
	hold         time.Duration

	level atomic.Int64 // effective level, read by Level

	mu         sync.Mutex
	computed   Level
	below      time.Time // since when the load is below the exit threshold of computed
	forced     Level
	forceUntil time.Time
}

// New returns a Controller with the defaults (target 0.85, hysteresis 0.05,
// max level 3, hold 1s) changed by opts. It panics on an option value out
// of its documented range, a programming error.
func New(opts ...Option) *Controller {
	d := &Controller{target: DefaultTarget, hyst: DefaultHysteresis, max: DefaultMax, hold: DefaultHold}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Max returns the highest level.
func (d *Controller) Max() Level {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.max
}

// Target returns the load at which level 1 is entered.
func (d *Controller) Target() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.target
}

// threshold returns the load at which level l (≥ 1) is entered.
func (d *Controller) threshold(l Level) float64 {
	return d.target + float64(l-1)*(1-d.target)/float64(d.max)
}

// StepAt advances the controller to now with the current load and returns
// the effective level. A NaN load counts as 0.
func (d *Controller) StepAt(now time.Time, load float64) Level {
	if math.IsNaN(load) {
		load = 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// Rise at once to the highest level whose threshold is reached.
	up := d.computed
	for up < d.max && load >= d.threshold(up+1) {
		up++
	}
	if up > d.computed {
		d.computed = up
		d.below = time.Time{}
	} else if d.computed > 0 {
		if load < d.threshold(d.computed)-d.hyst {
			if d.below.IsZero() {
				d.below = now
			}
			if now.Sub(d.below) >= d.hold {
				d.computed--
				d.below = now
			}
		} else {
			d.below = time.Time{}
		}
	}
	eff := d.computed
	if !d.forceUntil.IsZero() {
		if now.Before(d.forceUntil) {
			eff = d.forced
		} else {
			d.forceUntil = time.Time{}
			d.forced = 0
		}
	}
	d.level.Store(int64(eff))
	return eff
}

// Level returns the effective level as of the last StepAt or Force. It is a
// single atomic load.
func (d *Controller) Level() Level { return Level(d.level.Load()) }

// Force sets the level to l until the time until, whatever the load, for
// drills that keep degraded code paths exercised. It takes effect at once;
// the first StepAt at or after until returns to the computed level. l is
// clamped to 0..Max; a zero until cancels a drill.
func (d *Controller) Force(l Level, until time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l = max(0, min(l, d.max))
	d.forced, d.forceUntil = l, until
	if until.IsZero() {
		d.level.Store(int64(d.computed))
		return
	}
	d.level.Store(int64(l))
}

// Forced reports the drill in force at now, if any: its level and expiry.
func (d *Controller) Forced(now time.Time) (l Level, until time.Time, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.forceUntil.IsZero() || !now.Before(d.forceUntil) {
		return 0, time.Time{}, false
	}
	return d.forced, d.forceUntil, true
}
