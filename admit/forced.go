package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee"
)

// Forced shed levels.
//
// ForceShed and OverloadShed set floors under the shed level: while one
// is in force, the plan sheds at least that much whatever the signals
// say, lowest criticality first, for everyone: with a floor at 1.5, every
// SHEDDABLE request and half of the SHEDDABLE_PLUS ones are rejected as
// Overloaded, and if the signals ask for more, they get more. Two callers
// need a floor, and each has its own slot, so that neither overwrites the
// other: drills (ForceShed: an operator, or `levee load drill` through
// leveehttp's admin endpoint, checks that the service's clients cope with
// rejections in the right order) and an overload manager (OverloadShed:
// package overload raises the floor while memory, descriptors or
// goroutines run out, and renews it every period with a short expiry, so
// that it ends by itself when the manager stops). The floor in force is
// the higher of the two. Each ends at the first Step at or after its
// expiry; a plan carries them only as long as any plan lives (four
// periods without a Step), so a controller nobody steps sheds nothing for
// them.

// floorSource is who set a floor: each has its own slot.
type floorSource uint8

const (
	drillFloor    floorSource = iota // ForceShed
	overloadFloor                    // OverloadShed
	numFloors
)

// forcedShed is a floor set by ForceShed or OverloadShed; the
// Controller keeps one per floorSource.
type forcedShed struct {
	level float64
	until time.Time
	end   int64 // until on the controller's scale
}

// ForceShed sets the shed level to at least level (0 … 4, the scale of
// Snapshot.ShedLevel: 1 sheds every SHEDDABLE request, 1.5 also half of
// the SHEDDABLE_PLUS ones, 4 everything) until the time until, whatever
// the signals say; the signals may shed more. It is the drill's floor:
// an overload manager's (OverloadShed) neither replaces it nor is
// replaced by it, and the higher of the two is in force. Levels above 4
// count as 4. A level ≤ 0 or NaN, or a zero until, ends the floor. A new
// level takes effect for the next Admit (the plan in force is rebuilt
// with it; a call renewing the level in force only moves its expiry), and
// the floor ends at the first Step at or after until. Each call replaces
// the previous drill. In dry-run the forced shedding is counted as
// would-be rejections, not applied. Safe for concurrent use; it takes the
// Controller's lock (never the accept path's).
func (c *Controller) ForceShed(level float64, until time.Time) {
	c.setFloor(drillFloor, level, until)
}

// OverloadShed is ForceShed for an overload manager (package overload's
// Shed action): a floor of its own, which a drill neither replaces nor is
// replaced by; the higher of the two is in force. The manager calls it at
// every step while its action lasts, with an expiry a few periods ahead,
// and never to end it: it ends at the first Step at or after until, or at
// once with a level ≤ 0. Snapshot.OverloadShed reports it.
func (c *Controller) OverloadShed(level float64, until time.Time) {
	c.setFloor(overloadFloor, level, until)
}

// setFloor replaces the floor of src and rebuilds the plan in force when
// the floor in force changes.
func (c *Controller) setFloor(src floorSource, level float64, until time.Time) {
	var f *forcedShed
	if level > 0 && !until.IsZero() {
		f = &forcedShed{level: min(level, levee.NumCriticalities), until: until, end: c.mono(until)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forced[src].Store(f)
	floor := highest(c.forcedAt(c.last))
	if c.hasLast && floor != c.planned.floor {
		// Rebuild the plan in force with the new floor, from the last
		// Step's input: a drill starts (or stops) now, not a period later.
		c.planned.floor = floor
		res, _ := c.tenants.plan(c.planned)
		c.publishPlan(res.p, c.plan.Load())
	}
}

// ForcedShed reports the drill's floor (ForceShed) that is in force at
// now: its level and expiry, and ok false when there is none.
func (c *Controller) ForcedShed(now time.Time) (level float64, until time.Time, ok bool) {
	return c.floorIn(drillFloor, now)
}

// OverloadShedFloor reports the overload manager's floor (OverloadShed)
// that is in force at now: its level and expiry, and ok false when there
// is none.
func (c *Controller) OverloadShedFloor(now time.Time) (level float64, until time.Time, ok bool) {
	return c.floorIn(overloadFloor, now)
}

func (c *Controller) floorIn(src floorSource, now time.Time) (level float64, until time.Time, ok bool) {
	f := c.forced[src].Load()
	if f == nil || c.mono(now) >= f.end {
		return 0, time.Time{}, false
	}
	return f.level, f.until, true
}

// forcedAt returns the floors in force at now (the controller's scale),
// nil where none; an expired floor is removed.
func (c *Controller) forcedAt(now int64) (fs [numFloors]*forcedShed) {
	for s := range c.forced {
		f := c.forced[s].Load()
		if f != nil && now >= f.end {
			c.forced[s].CompareAndSwap(f, nil)
			f = nil
		}
		fs[s] = f
	}
	return fs
}

// highest returns the highest of the floors fs, 0 when none.
func highest(fs [numFloors]*forcedShed) float64 {
	floor := 0.0
	for _, f := range fs {
		if f != nil {
			floor = max(floor, f.level)
		}
	}
	return floor
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
