package overload

import (
	"errors"
	"math"
	"strconv"
	"time"
)

// Level says how close the process is to one of its limits. Each action
// starts at a level (Action, WithAction) and the manager's level is the
// highest of its resources' levels.
type Level int8

// The levels, from no pressure to the last one before the process dies.
const (
	// Off is the level of a disabled action: it never starts.
	Off Level = -1
	// Normal: every resource is below its first threshold.
	Normal Level = 0
	// Elevated: a resource nears its limit. Default actions: the
	// SHEDDABLE criticality is shed, large request bodies are refused.
	Elevated Level = 1
	// High: a resource is close to its limit. Default actions: SHEDDABLE_PLUS
	// is shed too, keep-alive is off, idle and header timeouts are short,
	// a stale heap reading is refreshed by a collection.
	High Level = 2
	// Critical: the resource is about to run out. Default action: every
	// request but health probes and CRITICAL_PLUS is refused, cheaply.
	Critical Level = 3
)

// NumLevels is the number of levels from Normal to Critical.
const NumLevels = 4

var levelNames = [NumLevels]string{"normal", "elevated", "high", "critical"}

// String returns "off", "normal", "elevated", "high" or "critical".
func (l Level) String() string {
	switch {
	case l == Off:
		return "off"
	case l >= Normal && l < NumLevels:
		return levelNames[l]
	}
	return "Level(" + strconv.Itoa(int(l)) + ")"
}

// ParseLevel returns the level named s: "off", "normal", "elevated",
// "high" or "critical" (String's names).
func ParseLevel(s string) (Level, error) {
	for l := Off; l < NumLevels; l++ {
		if s == l.String() {
			return l, nil
		}
	}
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return Off, errors.New("overload: unknown level " + strconv.Quote(s) + " (want off, normal, elevated, high or critical)")
}

// UnmarshalText parses a level's name (ParseLevel), so that a
// configuration file can say `level: high`.
func (l *Level) UnmarshalText(b []byte) error {
	v, err := ParseLevel(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// valid reports whether l is Off or one of Normal..Critical.
func (l Level) valid() bool { return l >= Off && l < NumLevels }

// levelFor is the resource stage: the level a reading v puts a resource
// at, given the level prev it was at. A level is entered when v reaches
// its threshold and kept until v falls below the threshold less margin;
// a threshold that is not positive is never reached. A reading that is
// NaN says nothing: the resource is at Normal.
func levelFor(prev Level, v float64, enter [NumLevels - 1]float64, margin float64) Level {
	if math.IsNaN(v) {
		return Normal
	}
	for l := Critical; l >= Elevated; l-- {
		e := enter[l-1]
		if !(e > 0) {
			continue
		}
		if v >= e || (prev >= l && v >= e-margin) {
			return l
		}
	}
	return Normal
}

// hold is an action's time hysteresis: the highest level seen, kept
// until the level has stayed below it for the action's cooldown. A level
// rises at once; it falls, to the level of the moment, only after the
// cooldown.
type hold struct {
	level Level
	below time.Time // when the level first fell below level; zero while it has not
}

// step returns the hold after a step at now with the manager at level l.
func (h hold) step(l Level, now time.Time, cooldown time.Duration) hold {
	if l >= h.level {
		return hold{level: l}
	}
	if h.below.IsZero() || now.Before(h.below) {
		h.below = now // a clock that went back restarts the cooldown
	}
	if now.Sub(h.below) >= cooldown {
		return hold{level: l}
	}
	return h
}
