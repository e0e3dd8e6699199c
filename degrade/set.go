package degrade

import (
	"time"

	"github.com/levee-dev/levee/internal/option"
)

// The parameters can be changed while the controller runs, for a
// configuration reload. Each setter accepts the range its option documents
// (without the option's "0 means the default") and returns an error,
// changing nothing, otherwise: an option's bad value is a programming error
// and panics, a reload's is the operator's and must be answered. The next
// StepAt uses the new value; the level in force is not touched until then.

// SetTarget changes the load at which level 1 is entered (see
// WithTarget); f must be in (0, 1].
func (d *Controller) SetTarget(f float64) error {
	if !(f > 0 && f <= 1) {
		return option.New("degrade", "SetTarget", "must be in (0, 1]", f)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.target = f
	return nil
}

// SetHysteresis changes how far below its entry load a level is left (see
// WithHysteresis); h must be in [0, 1].
func (d *Controller) SetHysteresis(h float64) error {
	if !(h >= 0 && h <= 1) {
		return option.New("degrade", "SetHysteresis", "must be in [0, 1]", h)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hyst = h
	return nil
}

// SetMax changes the highest level (see WithMax); m must be in [1, 100].
// A level in force above the new highest one, computed or forced, is
// lowered to it at once.
func (d *Controller) SetMax(m Level) error {
	if m < 1 || m > 100 {
		return option.New("degrade", "SetMax", "must be in [1, 100]", m)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.max = m
	d.computed = min(d.computed, m)
	d.forced = min(d.forced, m)
	if l := Level(d.level.Load()); l > m {
		d.level.Store(int64(m))
	}
	return nil
}

// SetHold changes how long the load must stay low before a level is left
// (see WithHold); h must be in [0, 1h].
func (d *Controller) SetHold(h time.Duration) error {
	if h < 0 || h > time.Hour {
		return option.New("degrade", "SetHold", "must be in [0, 1h]", h)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hold = h
	return nil
}
