package pressure

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// atomicFloat is a float64 read by the controller while the sampler writes it.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) load() float64   { return math.Float64frombits(f.bits.Load()) }
func (f *atomicFloat) store(v float64) { f.bits.Store(math.Float64bits(v)) }

// ewma is an exponentially weighted moving average with a time constant:
// after a step change the average has moved 63% of the way in tau. Samples
// at uneven intervals weigh by their duration. tau = 0 means no smoothing.
type ewma struct {
	tau  time.Duration
	v    float64
	init bool
}

func (e *ewma) update(x float64, dt time.Duration) float64 {
	if !e.init || e.tau <= 0 {
		e.v, e.init = x, true
		return e.v
	}
	e.v += smoothingFactor(dt, e.tau) * (x - e.v)
	return e.v
}

// smoothingFactor is the weight of a new reading after dt in an
// exponentially weighted average with time constant tau: 1 − e^(−dt/tau),
// 1 when tau ≤ 0, 0 when dt ≤ 0.
func smoothingFactor(dt, tau time.Duration) float64 {
	if tau <= 0 {
		return 1
	}
	if dt <= 0 {
		return 0
	}
	return 1 - math.Exp(-float64(dt)/float64(tau))
}

// run calls sample with the tick time every period until ctx is done; the
// first sample is taken at once.
func run(ctx context.Context, period time.Duration, sample func(time.Time)) {
	if ctx.Err() != nil {
		return
	}
	sample(time.Now())
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			sample(now)
		}
	}
}

// checker collects option errors.
type checker struct{ errs []error }

func (c *checker) bad(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("pressure: "+format, args...))
}

func (c *checker) err() error {
	if len(c.errs) == 0 {
		return nil
	}
	return c.errs[0]
}

// mustValid panics with the first option error: the constructors whose
// signature has no error treat an out-of-range option as a programming
// error, as time.NewTicker does.
func (c *checker) mustValid() {
	if err := c.err(); err != nil {
		panic(err.Error())
	}
}

func (c *checker) period(name string, d time.Duration) {
	if d < 10*time.Millisecond || d > time.Minute {
		c.bad("%s(%v): must be in [10ms, 1m]", name, d)
	}
}

func (c *checker) smoothing(name string, d time.Duration) {
	if d < 0 || d > time.Minute {
		c.bad("%s(%v): must be in [0, 1m]", name, d)
	}
}

// tooSoon reports whether a sample at now comes less than half a period
// after the previous one at last (or not after it at all). Such samples
// are skipped: a sampler starved by a saturated scheduler finds two ticks
// waiting and would otherwise take a second sample over a few
// microseconds, all noise. The skipped time is covered by the next sample.
func tooSoon(now, last time.Time, period time.Duration) bool {
	return now.Sub(last) < period/2
}

// sampleClock is the sample timing of a signal: a sample less than half
// a period after the previous one is skipped (tooSoon), and the first
// sample has no interval to measure.
type sampleClock struct{ lastAt time.Time }

// next returns the time since the previous sample, whether this is the
// first, and whether to take it at all.
func (c *sampleClock) next(now time.Time, period time.Duration) (dt time.Duration, first, ok bool) {
	if !c.lastAt.IsZero() && tooSoon(now, c.lastAt, period) {
		return 0, false, false
	}
	first = c.lastAt.IsZero()
	dt = now.Sub(c.lastAt)
	if first {
		dt = period
	}
	c.lastAt = now
	return dt, first, true
}
