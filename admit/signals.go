package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee"
)

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
//     wait long (a delay signal at delayConfirm, three quarters, of its
//     target or more), or when there is no delay signal to ask, or, as a
//     safety net, when it has stayed above its target for utilPersist
//     periods (2 s) in which no delay signal saw anything wait (every one
//     below delayVisible, an eighth, of its target): the queue may then be
//     out of every delay signal's sight (in the kernel's socket buffers,
//     when requests are short and connections few). A delay signal that
//     sees a queue shorter than its target says the work is served in
//     time, and stops the net: near its capacity a server's busy spells
//     are long (an M/M/c queue at load 0.95 relaxes over about
//     1 ÷ (cores × service rate × (1 − √0.95)²), 5 s for 3 cores of 10 ms
//     requests, 24 s for 64 cores of 1 s), so a net on the CPU alone shed
//     requests that fit (the simulator's sweep at 0.95: 1–3 % on 3 cores
//     of 10 ms requests and on 64 of 1 s, with its queue read at 3–40 % of
//     the target throughout);
//   - the confirmation is three quarters of the target, not less: with
//     the queue's target at 100 service times per core, the interval
//     minimum of such a queue at load 0.95 passes half of it in about 7 %
//     of intervals and three quarters in about 2 % (ρ^50 and ρ^75), and a
//     confirmation at half shed 1–2 % of requests that fitted in the
//     sweep's exponential shapes at 0.95; a real overload's queue grows
//     past any fraction of the target within a few periods;
//   - a delay above its target is overload at once (at the boundary
//     between two criticalities, a re-entry one period late costs the more
//     critical one: CRITICAL admitted 0.986 instead of 0.991 when two
//     periods were required); a utilisation's verdict must hold for
//     entryPersist readings of the slowest delay signal that may confirm
//     it (utilEntry periods: the queue delay's 100 ms interval is two
//     50 ms periods, and one reading seen twice is not two): a busy
//     moment's reading, noisy around a target set near full use, is not
//     overload (measured in the simulator at 0.95 of capacity: 1.6–4.9%
//     of requests that fitted were shed without any persistence).
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
	delayConfirm = 0.75
	delayVisible = 0.125
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

// burster is a signal that tells a burst being absorbed from a standing
// queue (pressure.QueueDelay: a queue that rose while the controller did
// not shed, within the deadline-derived burst level and allowance). While
// one says so, the run queue stays first-come first-served with its
// configured wait (runbound.go's standing rule would otherwise cut the
// burst's waits at runShortWait and refuse the requests the signal holds
// to fit).
type burster interface{ Bursting() bool }

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
	util  []bool // per signal: a utilisation
	runs  []int  // per signal: consecutive periods above target
	over  int    // consecutive periods of overload evidence
	quiet int    // consecutive periods no delay signal saw anything wait
	// utilEntry is how many periods a utilisation's verdict must hold:
	// entryPersist readings of the slowest delay signal that may confirm
	// it (a queue's 100 ms interval is two 50 ms periods, and one reading
	// seen twice is not two).
	utilEntry int
}

// periodic is a signal that samples at its own period (package
// pressure's signals): a reading may stand for several control periods.
type periodic interface{ Period() time.Duration }

// newCombiner returns the combiner for signals sigs, util[i] telling
// whether sigs[i] is a utilisation, stepped every period.
func newCombiner(sigs []levee.Signal, util []bool, period time.Duration) combiner {
	c := combiner{util: util, runs: make([]int, len(util)), utilEntry: entryPersist}
	for i, s := range sigs {
		p, ok := s.(periodic)
		if util[i] || !ok || period <= 0 {
			continue
		}
		k := int((p.Period() + period - 1) / period) // control periods a reading stands for
		c.utilEntry = max(c.utilEntry, entryPersist*k)
	}
	return c
}

// step combines one period's states.
func (c *combiner) step(states []SignalState) reading {
	r := reading{bind: -1}
	delays, confirmed, delayOver, delaySeen, utils := 0, false, false, false, 0
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
			confirmed = confirmed || l >= delayConfirm
			delaySeen = delaySeen || l >= delayVisible
			delayOver = delayOver || l > 1
		}
	}
	if delaySeen {
		c.quiet = 0
	} else {
		c.quiet++
	}
	util := false
	for i := range states {
		if c.util[i] && c.runs[i] > 0 && (delays == 0 || confirmed || min(c.runs[i], c.quiet) >= utilPersist) {
			util = true
		}
	}
	if util || delayOver {
		c.over++
	} else {
		c.over = 0
	}
	r.over = delayOver || c.over >= c.utilEntry
	if utils == 0 {
		r.prop = r.load
	}
	return r
}
