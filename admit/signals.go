package admit

import "math"

// How signals combine.
//
// A delay signal (queueing delay, scheduler latency, a latency or
// concurrency signal: any signal that measures waiting) above its target
// means work waits longer than it should. A utilisation signal (one with
// a Saturation method, as package pressure's CPU has) above its target
// means the resource is busy: a server at 0.95 of its cores with nothing
// waiting serves everything in time, and noise around a 0.95 target
// would otherwise shed requests that fit. So:
//
//   - a delay signal above its target is overload;
//   - a utilisation above its target is overload when work is seen to
//     wait (a delay signal at half its target or more), or when there is
//     no delay signal to ask, or, as a safety net, when it has stayed
//     above its target for utilPersist periods (2 s) with no delay signal
//     seeing anything: the queue may be out of every delay signal's sight
//     (in the kernel's socket buffers, when requests are short and
//     connections few). The net is coarse on purpose: near its capacity a
//     server's busy spells are long (measured in the simulator: 64 cores
//     of 1 s requests at 0.95 of capacity keep every core busy for two
//     seconds at a time with nothing waiting long; 3 cores of 10 ms
//     requests, for a few hundred milliseconds), and a shorter net would
//     shed requests that fit;
//   - a delay above its target is overload at once (at the boundary
//     between two criticalities, a re-entry one period late costs the more
//     critical one: CRITICAL admitted 0.986 instead of 0.991 when two
//     periods were required); a utilisation's verdict must hold for
//     entryPersist periods: a busy moment's reading, noisy around a
//     target set near full use, is not overload (measured in the
//     simulator at 0.95 of capacity: 1.6–4.9% of requests that fitted
//     were shed without it).
//
// Once overloaded, the control law steers the maximum over all signals of
// value ÷ target to 1: the utilisation gives the proportional reading a
// delay signal cannot (a queue says "over", not by how much). One
// signal's noise thus cannot start shedding, and no real bottleneck is
// ignored: CPU-bound overload builds a queue or keeps the CPU above its
// target, and a slow dependency shows in the latency or concurrency
// signal whatever the CPU reads.
const (
	entryPersist = 2
	utilPersist  = 40
)

// saturating is a utilisation signal (package pressure's CPU): Saturation
// returns the reading at which the resource is fully used.
type saturating interface{ Saturation() float64 }

// bottleneck is a signal that measures the throughput of what it watches
// (pressure.Concurrency: the rate a dependency's pool completes while
// requests wait for it; 0 while nothing waits). When it binds, that rate
// is the capacity an overload episode starts from (law.go): the capacity
// learned from the CPU before a dependency slowed down says nothing about
// the pool.
type bottleneck interface{ Capacity() float64 }

// learner is a signal that learns its target from the service
// (pressure.QueueDelay's scale): the controller tells it every period
// whether it sheds, and it learns nothing meanwhile. An episode's
// readings describe the overload, not the service: with most arrivals
// refused, CPU per request observed is a fraction of CPU per request
// served.
type learner interface{ SetShedding(bool) }

// backlog is a signal that also counts demand the process has not read
// yet (pressure.SchedLatency: goroutines ready to run that wait for a
// processor, which on a saturated HTTP/1 server are mostly connections
// whose next request has arrived). No count of arrivals sees that demand
// until it is read, late and at once; the meter adds the count's change
// to the arrivals while the controller is overloaded (meter.go). NaN: no
// reading.
type backlog interface{ Unread() float64 }

// reading is the signals' verdict for one period.
type reading struct {
	load float64 // max over signals of value ÷ target; 0 when none reads
	// prop is the proportional reading: the largest utilisation's load,
	// or load when no utilisation reads. A delay says "over", not by how
	// much; the law divides by prop, not by a delay.
	prop float64
	over bool // overloaded by the rule above, persisted
	// bind is the index of the signal with the largest load, -1 for none.
	bind int
}

// combiner is the stage that applies the rule; it keeps how long each
// condition has held.
type combiner struct {
	util []bool // per signal: a utilisation
	runs []int  // per signal: consecutive periods above target
	over int    // consecutive periods of overload evidence
}

func newCombiner(util []bool) combiner {
	return combiner{util: util, runs: make([]int, len(util))}
}

// step combines one period's states.
func (c *combiner) step(states []SignalState) reading {
	r := reading{bind: -1}
	delays, delayHalf, delayOver, utils := 0, false, false, 0
	for i, s := range states {
		l := s.Load()
		if math.IsNaN(l) {
			c.runs[i] = 0
			continue
		}
		if math.IsInf(l, 0) {
			l = 100
		}
		if l > r.load {
			r.bind = i
		}
		r.load = max(r.load, l)
		if l > 1 {
			c.runs[i]++
		} else {
			c.runs[i] = 0
		}
		if c.util[i] {
			utils++
			r.prop = max(r.prop, l)
		} else {
			delays++
			delayHalf = delayHalf || l >= 0.5
			delayOver = delayOver || l > 1
		}
	}
	util := false
	for i := range states {
		if c.util[i] && c.runs[i] > 0 && (delays == 0 || delayHalf || c.runs[i] >= utilPersist) {
			util = true
		}
	}
	if util || delayOver {
		c.over++
	} else {
		c.over = 0
	}
	r.over = delayOver || c.over >= entryPersist
	if utils == 0 {
		r.prop = r.load
	}
	return r
}
