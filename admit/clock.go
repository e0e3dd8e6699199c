package admit

import (
	"log/slog"
	"time"
)

// clock is where the real-time path (Run, Admit, Ticket.Wait, Ticket.Done)
// reads the time: nanoseconds since the Controller's origin. Every gate and
// window of the Controller is measured on this scale, so its readings must
// never decrease; the real clock is Go's monotonic clock, which a
// wall-clock step (NTP, a VM resumed, an operator) does not move.
type clock interface {
	now() int64
}

// monoClock reads the monotonic clock.
type monoClock struct{ origin time.Time }

func (m monoClock) now() int64 { return max(1, int64(time.Since(m.origin))) }

// The explicit-time API (AdmitAt, DoneAt, Step) converts its times to the
// same scale: t.Sub(origin), which Go measures on the monotonic clock when
// t carries a reading of it (time.Now does) and on the wall clock
// otherwise (virtual time), plus an offset that grows when a Step's time
// falls before the previous one's: a wall clock stepped back is taken as
// one period elapsed, and the scale goes on from there instead of
// freezing every window until the clock catches up.

// mono converts an explicit time to the controller's scale.
func (c *Controller) mono(t time.Time) int64 {
	return int64(t.Sub(c.origin)) + c.offset.Load()
}

// timeAt converts a reading of the controller's scale back to a time, for
// the degradation controller and reports; it carries the origin's
// monotonic reading, so it compares correctly with time.Now-based times.
func (c *Controller) timeAt(mono int64) time.Time {
	return c.origin.Add(time.Duration(mono - c.offset.Load()))
}

// unrun is Admit's clock when Run is not active: it reads the clock and,
// when no Step has run for a period, steps from the request path
// so that a Controller whose Run was never started (or has stopped) still
// protects; the first time, it says so in the log.
func (c *Controller) unrun() int64 {
	now := c.clk.now()
	if now-c.stepped.Load() >= int64(c.cfg.period) && c.stepping.CompareAndSwap(false, true) {
		c.unrunOnce.Do(func() {
			l := c.cfg.logger
			if l == nil {
				l = slog.Default()
			}
			l.Warn("admit: Step is not being called (Run not started, or stopped); stepping from Admit")
		})
		c.stepReal(now, true)
		c.stepping.Store(false)
	}
	return now
}

// stepReal steps at now, a reading of the real clock. With sample, it
// first samples the signals that can be sampled: the requests step the
// controller when no timer does, and the signals' own samplers may be
// starved too.
func (c *Controller) stepReal(now int64, sample bool) {
	t := c.timeAt(now)
	for _, s := range c.cfg.signals {
		if sm, ok := s.(sampler); ok && sample {
			sm.SampleAt(t)
		}
	}
	for _, e := range c.stepAt(t, now, false) {
		c.emit(e)
	}
}
