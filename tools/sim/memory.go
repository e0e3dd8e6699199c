package sim

import (
	"math"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/overload"
)

// An instance's memory is the share of its memory limit (Tier.MemoryLimit,
// in requests) that its requests in flight hold: queued, running and
// waiting on downstream calls. Past 1 the process dies (the crash rule,
// in arrive). A protected instance reads the same figure through levee's
// overload manager (overload.MemoryResource: the thresholds and goal of a
// real process's memory against GOMEMLIMIT) and refuses cheaply instead:
// its gate holds the requests in flight at the number that brings the
// memory to the goal (0.9 of the limit), and at the Critical level (0.98)
// only CRITICAL_PLUS requests get in. The refusal happens as a request
// arrives, before it holds anything, and costs no CPU in the model.

// memory returns the instance's memory: in-flight ÷ memory limit, NaN
// without a limit.
func (in *instance) memory() float64 {
	lim := in.memLimit()
	if lim <= 0 {
		return math.NaN()
	}
	return float64(in.inflight) / float64(lim)
}

// newOverload returns the overload manager of a protected instance with a
// memory limit (nil otherwise), stepped by control at admit's period.
func (w *world) newOverload(in *instance) *overload.Manager {
	if in.memLimit() <= 0 {
		return nil
	}
	res := overload.MemoryResource(func() overload.Reading {
		return overload.Reading{Value: in.memory(), Used: float64(in.inflight), Limit: float64(in.memLimit())}
	})
	opts := []overload.Option{
		overload.WithResources(res),
		overload.WithPeriod(max(w.s.Levee.Period.D(), 10*time.Millisecond)),
		overload.WithCollector(func() {}), // nothing to collect: the reading is never stale
	}
	if s, ok := any(in.ctrl).(overload.Shedder); ok {
		opts = append(opts, overload.WithShedder(s))
	}
	return overload.New(opts...)
}

// memoryGate asks a protected instance's overload manager whether job may
// come in. It reports true, having answered the job with the refusal,
// when it may not.
func (w *world) memoryGate(in *instance, j *job) bool {
	if in.ov == nil {
		return false
	}
	v := in.ov.EnterAt(at(w.now), j.crit, 0)
	if v == overload.Pass {
		return false
	}
	in.rejected[w.bkt(w.now)]++
	in.byReason[levee.Overloaded]++
	c := j.c
	w.freeJob(j)
	w.outcome(c, v.Err())
	return true
}
