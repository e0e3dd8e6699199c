package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee"
)

// A forced shed level.
//
// ForceShed sets a floor under the shed level: while it is in force, the
// plan sheds at least that much whatever the signals say, lowest
// criticality first, for everyone: with the floor at 1.5, every SHEDDABLE
// request and half of the SHEDDABLE_PLUS ones are rejected as Overloaded,
// and if the signals ask for more, they get more. Two callers need it:
// drills (an operator, or `levee load drill` through leveehttp's admin
// endpoint, checks that the service's clients cope with rejections in
// the right order) and an overload manager, which raises the floor while
// memory, descriptors or goroutines run out and renews it every period
// with a short expiry, so that it ends by itself when the manager stops.
// The floor ends at the first Step at or after its expiry; a plan carries
// it only as long as any plan lives (four periods without a Step), so a
// controller nobody steps sheds nothing for it.

// forcedShed is a floor set by ForceShed.
type forcedShed struct {
	level float64
	until time.Time
	end   int64 // until on the controller's scale
}

// ForceShed sets the shed level to at least level (0 … 4, the scale of
// Snapshot.ShedLevel: 1 sheds every SHEDDABLE request, 1.5 also half of
// the SHEDDABLE_PLUS ones, 4 everything) until the time until, whatever
// the signals say; the signals may shed more. Levels above 4 count as 4.
// A level ≤ 0 or NaN, or a zero until, ends the floor. A new level takes
// effect for the next Admit (the plan in force is rebuilt with it; a
// call renewing the level in force only moves its expiry), and the floor
// ends at the first Step at or after until. Each call replaces the
// previous floor: a drill and an overload manager forcing levels at the
// same time see the latest call win, which a manager renewing its floor
// every period makes its own within a period. In dry-run the forced
// shedding is counted as would-be rejections, not applied. Safe for
// concurrent use; it takes the Controller's lock (never the accept
// path's).
func (c *Controller) ForceShed(level float64, until time.Time) {
	var f *forcedShed
	if level > 0 && !until.IsZero() {
		f = &forcedShed{level: min(level, levee.NumCriticalities), until: until, end: c.mono(until)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forced.Store(f)
	floor := 0.0
	if f != nil && f.end > c.last {
		floor = f.level
	}
	if c.hasLast && floor != c.planned.floor {
		// Rebuild the plan in force with the new floor, from the last
		// Step's input: a drill starts (or stops) now, not a period later.
		c.planned.floor = floor
		res, _ := c.tenants.plan(c.planned)
		c.publishPlan(res.p, c.plan.Load())
	}
}

// ForcedShed reports the floor set by ForceShed that is in force at now:
// its level and expiry, and ok false when there is none.
func (c *Controller) ForcedShed(now time.Time) (level float64, until time.Time, ok bool) {
	f := c.forced.Load()
	if f == nil || c.mono(now) >= f.end {
		return 0, time.Time{}, false
	}
	return f.level, f.until, true
}

// forcedAt returns the floor in force at now (the controller's scale),
// nil when none; an expired floor is removed.
func (c *Controller) forcedAt(now int64) *forcedShed {
	f := c.forced.Load()
	if f != nil && now >= f.end {
		c.forced.CompareAndSwap(f, nil)
		return nil
	}
	return f
}

// floorFractions returns, per rank, the share a shed level sheds: all of
// the ranks below its integer part, its fraction of the next one.
func floorFractions(level float64) (f [levee.NumCriticalities]float64) {
	if !(level > 0) {
		return f
	}
	full := int(math.Floor(level))
	for r := range f {
		switch {
		case r < full:
			f[r] = 1
		case r == full:
			f[r] = level - float64(full)
		}
	}
	return f
}
