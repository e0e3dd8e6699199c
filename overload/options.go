package overload

import (
	"log/slog"
	"runtime"
	"time"

	"github.com/levee-dev/levee/internal/option"
)

// Option configures a Manager. An out-of-range value makes New panic with
// an "overload: ..." message (a programming error); a configuration file
// validates before it gets here.
type Option func(*config)

type config struct {
	resources  []Resource
	period     time.Duration
	actions    [NumActions]actionConfig
	floors     [NumLevels]float64
	bodyLimit  int64
	idle       time.Duration
	header     time.Duration
	shares     [2]float64 // SHEDDABLE, SHEDDABLE_PLUS
	minFlight  int64
	staleAfter time.Duration
	maxAge     time.Duration
	shedder    Shedder
	logger     *slog.Logger
	observer   func(Event)
	collect    func()
	thresholds map[string]Thresholds // WithThresholds, by resource name
}

func defaultConfig() config {
	return config{
		period:     DefaultPeriod,
		actions:    defaultActions,
		floors:     [NumLevels]float64{0, 1, 2, 3},
		bodyLimit:  1 << 20,
		idle:       time.Second,
		header:     2 * time.Second,
		shares:     [2]float64{0.8, 0.9},
		minFlight:  2,
		staleAfter: 500 * time.Millisecond,
		maxAge:     5 * time.Second,
		collect:    runtime.GC,
	}
}

// apply applies opts to c and returns the first option error instead of
// panicking with it.
func (c *config) apply(opts []Option) (err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*option.Error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return nil
}

// DefaultPeriod is the period at which Run steps the Manager when
// WithPeriod is not given: the memory signal's sampling period.
const DefaultPeriod = 100 * time.Millisecond

// WithResources adds resources to watch (Resources builds those of a
// pressure.Set). A resource with an empty or repeated name, a nil Read,
// thresholds that do not ascend or a negative margin or goal is an option
// error. Without resources the level stays Normal.
func WithResources(rs ...Resource) Option {
	return func(c *config) {
		for _, r := range rs {
			msg := r.validate()
			for _, o := range c.resources {
				if o.Name == r.Name && msg == "" {
					msg = "the name is used by another resource"
				}
			}
			option.Check(msg == "", "overload", "WithResources", msg, r.Name)
			c.resources = append(c.resources, r)
		}
	}
}

// Thresholds are a resource's levels as Resource holds them: Enter for
// Elevated, High and Critical (ascending; a 0 is never reached), Margin
// (0: DefaultMargin) and Goal (0: the requests in flight are not capped
// for it).
type Thresholds struct {
	Enter  [NumLevels - 1]float64
	Margin float64
	Goal   float64
}

// WithThresholds sets the thresholds, margin and goal of the resource
// named name in place of those it was given (Memory's, GC's, ...),
// whether WithResources comes before or after it. A name that no resource
// has is ignored: which resources exist depends on the process (no
// "goroutines" without a ceiling, no "memory" when its signal is off).
// Thresholds that break Resource's rules are an option error. Reconfigure
// takes it while the Manager runs.
func WithThresholds(name string, t Thresholds) Option {
	return func(c *config) {
		r := Resource{Name: name, Read: func() Reading { return Reading{} }, Enter: t.Enter, Margin: t.Margin, Goal: t.Goal}
		msg := r.validate()
		option.Check(msg == "", "overload", "WithThresholds", msg, name, t.Enter, t.Margin, t.Goal)
		if c.thresholds == nil {
			c.thresholds = map[string]Thresholds{}
		}
		c.thresholds[name] = t
	}
}

// thresholded returns r with the thresholds ts give its name, if any.
func thresholded(r Resource, ts map[string]Thresholds) Resource {
	if t, ok := ts[r.Name]; ok {
		r.Enter, r.Margin, r.Goal = t.Enter, t.Margin, t.Goal
	}
	return r
}

// WithPeriod sets the period at which Run steps. It also sets how long
// the state of a step lasts without another: a shed floor, a refusal
// rule, shorter timeouts end by themselves 3 periods (at least 300 ms)
// after the last step, so that a Manager that stops (or whose goroutine
// starves) leaves nothing behind. Default DefaultPeriod (100ms); range
// [10ms, 10s]; 0 means the default.
func WithPeriod(d time.Duration) Option {
	return func(c *config) {
		option.Set(&c.period, d, d >= 10*time.Millisecond && d <= 10*time.Second, "overload", "WithPeriod", "must be in [10ms, 10s] (0 means the default, 100ms)")
	}
}

// WithAction sets the level from which action a is active (Off disables
// it). Defaults: see Action. An action or level out of range is an
// option error.
func WithAction(a Action, l Level) Option {
	return func(c *config) {
		option.Check(a < NumActions && l.valid(), "overload", "WithAction", "needs an Action and a level from Off to Critical", a, l)
		c.actions[a].level = l
	}
}

// WithCooldown sets how long the level must stay below action a's level
// before a ends. Defaults: see Action. Range [0, 10m].
func WithCooldown(a Action, d time.Duration) Option {
	return func(c *config) {
		option.Check(a < NumActions && d >= 0 && d <= 10*time.Minute, "overload", "WithCooldown", "needs an Action and a duration in [0, 10m]", a, d)
		c.actions[a].cooldown = d
	}
}

// WithShedFloors sets the shed level (admit.Snapshot.ShedLevel's scale, 0
// nothing shed … 4 everything) the Shed action holds the admission
// controller at, at least, at Elevated, High and Critical. Default 1, 2, 3:
// SHEDDABLE, then SHEDDABLE_PLUS, then CRITICAL fully shed, CRITICAL_PLUS
// never. Each in [0, 4], not descending.
func WithShedFloors(elevated, high, critical float64) Option {
	return func(c *config) {
		ok := elevated >= 0 && elevated <= high && high <= critical && critical <= 4
		option.Check(ok, "overload", "WithShedFloors", "each must be in [0, 4], not descending", elevated, high, critical)
		c.floors = [NumLevels]float64{0, elevated, high, critical}
	}
}

// WithShedder sets the admission controller the Shed action raises the
// shed level of. Default (and nil): none, and Shed does nothing.
func WithShedder(s Shedder) Option {
	return func(c *config) { c.shedder = s }
}

// WithBodyLimit sets the largest declared request body, in bytes, that
// the LargeBodies action lets through. Default 1 MiB; range [1, 1 TiB]; 0
// means the default.
func WithBodyLimit(n int64) Option {
	return func(c *config) {
		option.Set(&c.bodyLimit, n, n >= 1 && n <= 1<<40, "overload", "WithBodyLimit", "must be in [1, 1 TiB] (0 means the default, 1 MiB)")
	}
}

// WithTimeouts sets the idle and header timeouts of the Timeouts action:
// how long a connection may wait for a request's first byte, and then for
// the rest of its head. Defaults 1s and 2s; range [10ms, 1h]; 0 keeps a
// default.
func WithTimeouts(idle, header time.Duration) Option {
	return func(c *config) {
		for _, d := range []*struct {
			dst *time.Duration
			v   time.Duration
		}{{&c.idle, idle}, {&c.header, header}} {
			option.Set(d.dst, d.v, d.v >= 10*time.Millisecond && d.v <= time.Hour, "overload", "WithTimeouts", "each must be in [10ms, 1h] (0 keeps the default, 1s idle, 2s header)", idle, header)
		}
	}
}

// WithInFlightShares sets the share of the InFlight cap SHEDDABLE and
// SHEDDABLE_PLUS requests may use (CRITICAL uses all of it, CRITICAL_PLUS
// is not capped). Defaults 0.8 and 0.9; each in (0, 1], the first not
// above the second.
func WithInFlightShares(sheddable, sheddablePlus float64) Option {
	return func(c *config) {
		ok := sheddable > 0 && sheddable <= sheddablePlus && sheddablePlus <= 1
		option.Check(ok, "overload", "WithInFlightShares", "each must be in (0, 1], the first not above the second", sheddable, sheddablePlus)
		c.shares = [2]float64{sheddable, sheddablePlus}
	}
}

// WithMinInFlight sets the lowest the InFlight cap goes: however full a
// resource, this many requests may run. Default 2; range [1, 1e6]; 0
// means the default.
func WithMinInFlight(n int) Option {
	return func(c *config) {
		option.Set(&c.minFlight, int64(n), n >= 1 && n <= 1e6, "overload", "WithMinInFlight", "must be in [1, 1e6] (0 means the default, 2)", n)
	}
}

// WithStaleAfter sets how old a measurement renewed by garbage
// collections (Reading.Cycle) may get before the Collect action forces a
// collection, while the resource is at Elevated or above or the InFlight
// cap it sets refuses requests. Default 500ms; range [10ms, 1m]; 0 means
// the default.
func WithStaleAfter(d time.Duration) Option {
	return func(c *config) {
		option.Set(&c.staleAfter, d, d >= 10*time.Millisecond && d <= time.Minute, "overload", "WithStaleAfter", "must be in [10ms, 1m] (0 means the default, 500ms)")
	}
}

// WithMaxAge sets the age beyond which a reading counts as none. Default
// 5s; range [100ms, 1h]; 0 means the default.
func WithMaxAge(d time.Duration) Option {
	return func(c *config) {
		option.Set(&c.maxAge, d, d >= 100*time.Millisecond && d <= time.Hour, "overload", "WithMaxAge", "must be in [100ms, 1h] (0 means the default, 5s)")
	}
}

// WithCollector sets the function the Collect action calls, in a
// goroutine of its own and one call at a time. Default (and nil):
// runtime.GC.
func WithCollector(f func()) Option {
	return func(c *config) {
		if f != nil {
			c.collect = f
		}
	}
}

// WithLogger sets the logger every change (level, action started or
// ended) is logged to, once per change, never per request. Default (and
// nil): none.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// WithObserver sets a function called with every change, from the
// goroutine that steps the Manager; it must not call Step. Default (and
// nil): none.
func WithObserver(f func(Event)) Option {
	return func(c *config) { c.observer = f }
}
