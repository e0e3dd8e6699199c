package admit

import (
	"math"
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

// busyProp is the utilisation reading (÷ its target) above which a process
// whose queue binds is taken to have its resource and to use it: an
// episode it starts divides by that reading, not by the delay's (enter).
const busyProp = 0.8

// idleMax is the largest share of its target a process is taken to use
// whatever it serves: the runtime, timers, the pressure samplers, idle
// connections. A utilisation read at load l then puts the capacity
// between the admitted rate ÷ l (nothing used that way) and that times
// l(1−idleMax)/(l−idleMax) (the most): learned near the target the two
// meet, learned at light load the estimate is only a floor (capCeil).
// Taken for the capacity, a floor learned at 0.2× on loopback (596/s on
// a server that serves ~940/s) made 0.9× of the capacity a flood,
// capped the aim of the episode it started below the demand, and naive
// clients' retries then kept that episode alive (TestLightLoadThenNear).
const idleMax = 0.15

// learnLoad is the load below which nothing is learned of the capacity.
// (At twice idleMax it would be 0.3: a process at 0.2× of its capacity
// learns nothing then, and a flood from there is not seen in the
// arrivals: TestSybilPrefixIsOneTenant's legitimate tenants got 0.76.)
const learnLoad = 0.2

// law is the state of the control law (see doc.go): the capacity it has
// learned, whether it is shedding, and the admitted-rate target it steers.
// Its step is a pure function of (state, inputs) → (state, outputs).
type law struct {
	capEst   float64 // admitted rate at which the load sits at 1, learned while not shedding: a floor (idleMax)
	capHigh  float64 // the most the capacity can be, learned with capEst (capCeil)
	shedding bool
	target   float64 // admitted-rate target while shedding
	capStart float64 // the target when the episode started
	drain    float64 // estimated backlog (requests) still to drain
	sawOver  bool    // the signal showed load > 1 during the drain
	under    int     // consecutive periods with load < 1 while shedding
	idle     int     // consecutive periods with load < minLoad while shedding
	corr     float64 // integral correction of the estimate
	prevLoad float64 // the previous reading, clamped
	lastLoad float64 // the previous reading
	hold     int     // periods a delay reading does not cut the target after a drain
	spike    int     // consecutive periods a delay spike with the utilisation below target was held (steer)
	epStart  int64   // ns: the episode's start
	lastShed int64   // ns: the last period with something to shed

	admCnt   [2]float64              // admitted in the last two periods (newest first)
	rateHist [lagPeriods + 1]float64 // admitted rate, last periods
	ratePos  int
	admHist  [lagPeriods + 2]periodCount // admitted, last periods
	histPos  int
}

// lawIn is one period's input to the control law.
type lawIn struct {
	now      int64         // ns
	dt       time.Duration // length of the period
	load     float64       // the signals' reading (max over signals)
	prop     float64       // the proportional reading (signals.go)
	R        float64       // smoothed eligible arrival rate (meter)
	admRate  float64       // smoothed admitted rate (meter)
	admitted float64       // this period's admitted rate (meter)
	over     bool          // the signals say overloaded (signals.go)
	flood    bool          // the meter saw a flood this period ...
	wasFlood bool          // ... and the previous one
	degraded bool          // the degradation level was above 0 before this period
	snapped  bool          // the last plan held a criticality boundary
	dry      bool          // dry-run: nothing is shed, the aim is estimated
	// bottleneck is the throughput (requests/s) of the bottleneck the
	// binding signal measures (a dependency's pool: pressure.Concurrency's
	// Capacity), 0 when the binding signal measures none.
	bottleneck float64
}

// periodCount is what one period admitted, and its length.
type periodCount struct{ n, sec float64 }

// lawOut is what the law decided for the next period.
type lawOut struct {
	aim      float64 // admitted rate to aim for in the steady state: the target
	shed     float64 // rate to shed for it: R − aim, ≥ 0 (0 when not shedding)
	drain    float64 // rate to shed besides, to work a flood's backlog off (plan.go says from whom)
	capacity float64 // the capacity the plan divides among tenants
	// started and ended: an overload episode began or ended this period;
	// epLen is the ended episode's length.
	started, ended bool
	epLen          time.Duration
}

// step runs the law for one period.
func (s law) step(in lawIn) (law, lawOut) {
	var out lawOut
	load, sec, R := in.load, in.dt.Seconds(), in.R

	// Capacity estimate: the admitted rate that would put the load at 1,
	// from the admitted rate lagPeriods ago (what the signal reflects now),
	// only while the rate is steady and the signal not saturated. Steady:
	// the smoothed rate then and now agree, and agree with what the
	// periods the signal reflects admitted (lagCount) within their
	// Poisson noise — the smoothed rate still climbing the tail of a step
	// of the demand passed the first test alone, and the first estimate,
	// taken as it is, came out at 0.6 of the capacity.
	admCount := in.admitted * sec
	s.admHist[s.histPos%len(s.admHist)] = periodCount{admCount, sec}
	s.histPos++
	lagged := s.rateHist[(s.ratePos+1)%len(s.rateHist)]
	s.rateHist[s.ratePos%len(s.rateHist)] = in.admRate
	s.ratePos++
	steady := lagged > 0 && math.Abs(in.admRate-lagged) <= 0.2*lagged &&
		math.Abs(load-s.lastLoad) <= 0.1*load && // a reading still moving is not aligned with the rate
		s.agrees(lagged)
	prevLoad := s.lastLoad
	s.lastLoad = load
	ac := smooth.Alpha(in.dt, capTau)
	if !s.shedding && load > learnLoad && load <= 1 && steady {
		s = s.learnCapacity(lagged/load, load, ac)
	}

	// On entry, start from the capacity estimate and drain the queue the
	// flood built before it was seen; then move the admitted-rate target
	// towards admitted ÷ load (lag-aligned), with a slow integral of the
	// load error.
	if !s.shedding && R > 0 && in.degraded && (in.over || in.flood && in.wasFlood) {
		s = s.enter(in)
		out.started = true
	} else if s.shedding && !in.dry {
		s = s.steer(in, admCount, steady, lagged, ac, prevLoad)
	}
	if s.shedding && in.dry {
		s = s.estimate(in)
	}
	s.admCnt[1], s.admCnt[0] = s.admCnt[0], admCount
	s.prevLoad = min(max(load, minLoad), maxLoad)
	out.aim = s.target
	if s.shedding {
		out.shed = max(0, R-out.aim)
		if s.drain > 0 {
			out.drain = max(0, min(R, out.aim)-max(0.1*s.capStart, s.capStart-s.drain/drainTime.Seconds()))
		}
		if out.shed > 0 || out.drain > 0 {
			s.lastShed = in.now
		} else if in.now-s.lastShed >= int64(episodeHold) && load < endLoad {
			s.shedding = false
			out.ended = true
			out.epLen = time.Duration(s.lastShed - s.epStart)
		}
	}
	out.capacity = s.capEst
	if s.shedding {
		out.capacity = s.target
	}
	return s, out
}

// enter starts an overload episode.
func (s law) enter(in lawIn) law {
	s.shedding = true
	s.epStart, s.lastShed = in.now, in.now
	if in.bottleneck > 0 {
		// The binding signal measures its bottleneck's throughput (a
		// dependency slowed down behind a pool): that is the capacity
		// now, whatever the CPU-bound periods before taught. Aim at it,
		// and drain what was admitted above it while the signal rose.
		s.target = in.bottleneck
		return s.startDrain(in.bottleneck)
	}
	if in.flood && in.wasFlood && s.capEst > 0 {
		// Entered on a flood seen in the arrivals: whatever the signals
		// read now is the backlog the flood built before the first
		// shedding Step, not lost capacity. Aim at the capacity learned
		// before it (its floor: the steering raises a low aim within a
		// few periods, a high one stalls the process) and drain the
		// backlog (below).
		s.target = s.capEst
		return s.startDrain(s.capEst)
	}
	// The divisor: a delay signal is not proportional to the admitted
	// rate — a spike of it says "over", not by how much — so it is
	// clamped as the law clamps it. But when a queue before the handlers
	// binds (queueing delay, scheduler latency) while a utilisation reads
	// at least busyProp of its target, the process has its resource and
	// uses nearly all of it: what was admitted fits, and the queue is a
	// flood read late — a saturated process reads its connections behind
	// the handlers it runs, so the arrivals it counted are a fraction of
	// those waiting and no signal that measures arrivals saw a flood.
	// Then the capacity is divided by the proportional reading.
	// Dividing by the delay cut a one-core server's target from 382 to
	// 214 requests/s at a 3× onset and left the core at 0.2–0.6 for most
	// of a second (traced on loopback). (A bottleneck's delay entered
	// above; without a utilisation signal prop is the load.)
	base, div := in.admRate, min(in.load, maxLoad)
	limit := s.entryLimit(in.R)
	// The smoothed admitted rate lags a step of the demand: the reading
	// reflects what was admitted lagPeriods−1 and lagPeriods periods
	// ago, the base when surely higher (lagFloor: a few requests a
	// period are mostly noise — at 20 ms per request, two periods' count
	// taken as it was collapsed a flood's goodput to 0.48 on one seed of
	// TestLateReadFloodCounted).
	base = max(base, s.lagFloor())
	if s.capEst > 0 {
		// The admitted rate reads low when the flood stalled the
		// process (nothing reached the handlers for a few periods):
		// the estimate learned before the episode is the better base.
		base = max(base, s.capEst)
		if in.prop < 0.9*in.load && in.prop >= busyProp {
			// A flood read late: the capacity, by the proportional
			// reading (what the admitted rate holds above it is the
			// burst just read, not the service's).
			base, div = min(base, limit), max(in.prop, 1)
		}
	}
	s.target = base / div
	if s.capEst > 0 && limit < s.target {
		s.target = limit
	}
	return s.startDrain(limit)
}

// entryLimit returns the capacity an episode entered at the arrival rate
// R is capped by and drains by. When the arrivals are above the most
// the capacity can be (capCeil), it is an overload whatever the capacity
// is, and the estimate models it. Below that, the estimate may be a
// light-load floor under the demand: the ceiling caps the aim, and only
// what was admitted above it is surely backlog. (Capped and drained by a
// floor learned at light load, an episode entered at 0.9× of the
// capacity shed a third of it, and naive clients' retries kept it going:
// TestLightLoadThenNear.) 0 when nothing was learned.
func (s law) entryLimit(R float64) float64 {
	if ceil := s.capCeil(); R < ceil {
		return ceil
	}
	return s.capEst
}

// estimate replaces steering in dry-run: nothing is shed, so the signals
// stay above target whatever the aim, and the admitted rate is the
// offered one. The aim is the capacity learned before the episode (frozen:
// in an episode only steer learns it, from admissions the aim shapes);
// there is no backlog of the aim's making to drain. When dry-run ends in
// an episode, steering starts from that aim.
func (s law) estimate(in lawIn) law {
	if s.capEst > 0 {
		s.target = s.capEst
	}
	s.drain, s.hold = 0, 0
	return s
}

// lagCount returns what was admitted in the periods the reading
// reflects — lagPeriods−1 and lagPeriods periods before the newest — and
// their length in seconds.
func (s law) lagCount() (n, sec float64) {
	for k := lagPeriods - 1; k <= lagPeriods; k++ {
		x := s.admHist[((s.histPos-1-k)%len(s.admHist)+len(s.admHist))%len(s.admHist)]
		n, sec = n+x.n, sec+x.sec
	}
	return n, sec
}

// lagFloor returns the admitted rate over the periods the reading
// reflects (lagCount), less two standard deviations of their Poisson
// count: a rate they surely exceeded.
func (s law) lagFloor() float64 {
	n, sec := s.lagCount()
	if sec == 0 {
		return 0
	}
	return max(0, n-2*math.Sqrt(n)) / sec
}

// agrees reports whether the periods the reading reflects admitted about
// rate: within a fifth of it, or within three standard deviations of
// their Poisson count.
func (s law) agrees(rate float64) bool {
	n, sec := s.lagCount()
	want := rate * sec
	return sec > 0 && math.Abs(n-want) <= max(0.2*want, 3*math.Sqrt(want))
}

// startDrain sets the episode's drain: the backlog admitted above
// capacity (requests/s) in the last periods, drained by aiming below the
// target. Without a capacity there is no model to drain by.
func (s law) startDrain(capacity float64) law {
	s.capStart = s.target
	s.drain = 0
	s.sawOver = false
	s.under, s.idle = 0, 0
	if capacity > 0 {
		for _, x := range s.admHist {
			s.drain += max(0, x.n-capacity*x.sec)
		}
	}
	s.corr = 1
	return s
}

// steer moves the target for one period of an episode; last is the
// previous period's reading.
func (s law) steer(in lawIn, admCount float64, steady bool, lagged, ac, last float64) law {
	load, sec := in.load, in.dt.Seconds()
	spike := load > 1 && in.prop < 1 && in.bottleneck == 0
	if !spike {
		s.spike = 0
	}
	if load < 1 {
		s.under++
	} else {
		s.under = 0
	}
	if load < minLoad {
		s.idle++
	} else {
		s.idle = 0
	}
	switch {
	case s.drain > 0 && load < 1 && (s.sawOver || s.under > lagPeriods):
		// The signal, after showing the overload, shows the backlog
		// gone; or it never showed one within the lag it has (the
		// entry was a spike of a delay signal, not a flood).
		s.drain = 0
	case s.drain > 0:
		s.sawOver = s.sawOver || load > 1
		// The signal is saturated by the backlog: steer by the model
		// (backlog shrinks by capacity − admitted) instead of
		// integrating a reading that cannot say how far over we are. A
		// utilisation above its target says the backlog is worked off
		// that much faster than at the target.
		s.drain -= s.capStart*sec*min(max(in.prop, 1), maxLoad) - admCount
		if s.drain <= 0.5*s.capStart*sec {
			s.drain = 0
			s.hold = delayHold
		}
	case load > 1 && in.prop < 0.9*load && s.hold > 0:
		// A delay binds, the utilisation reads lower, just after a drain:
		// the delay still reports the backlog of the episode's start (a
		// delay signal reports a wait when the work that waited runs, and
		// smooths it). The backlog was the flood's, not lost capacity:
		// hold the target for delayHold periods. A delay that stays (a
		// slow dependency) is steered by the estimate below after that.
		s.hold--
	case load > 1 && in.prop < 0.9*load && in.bottleneck == 0 && load < last:
		// A queue before the handlers binds (a delay signal that watches
		// no bottleneck of its own: queueing delay, scheduler latency)
		// and reads less than the period before: the backlog drains at
		// what is admitted now. A delay says how long the queue is, not
		// how far the admitted rate is over; cut again for every period
		// the backlog takes to drain, the target falls far below the
		// capacity and the core idles once the queue is gone (traced on
		// loopback: 383 → 97 requests/s in six periods on a core that
		// serves ~500/s, and a second at half the CPU to climb back).
		// Hold; a delay that stops falling is steered below. A
		// bottleneck's delay (a dependency's pool) is steered below
		// whatever it does: there the capacity itself fell.
	case spike && s.spike < spikeHold:
		// A queue before the handlers binds and rises (or stands) while
		// the utilisation reads below its target: the work waits, but
		// not for want of the resource — a burst of connections read at
		// once (hundreds of goroutines runnable together, the scheduler's
		// latency at three times its target for 150 ms with the CPU at
		// 0.64–0.9), not lost capacity. Cut for it and the resource idles
		// once the burst is through (traced in the demo's spike: the
		// target 388 → 205 requests/s, the CPU at 0.4–0.5 for half a
		// second). Hold for spikeHold periods; a wait that lasts (a core
		// taken by another process) is steered below after that.
		s.spike++
	case s.admCnt[0]+s.admCnt[1] >= 4 && load > 0.05:
		s.hold = 0
		// The signal now reflects what was admitted lagPeriods−1 and
		// lagPeriods periods ago; admitted ÷ load over those periods is
		// the admitted rate that puts the load at 1, and the arrival
		// noise in both cancels. Move part of the way to it.
		l := min(max(load, minLoad), maxLoad)
		est := (s.admCnt[0] + s.admCnt[1]) / ((l + s.prevLoad) * sec)
		// A slow integral of the load error removes what the estimate
		// cannot see (admissions below the aim, work that is not
		// proportional to admissions).
		if !in.snapped || l > 1+boundarySlack || l < 1 {
			s.corr = min(max(s.corr*math.Pow(l, -integralGain), 0.7), 1.4)
		}
		// Rises are limited to 10% a period: a reading that lags more
		// than the estimate assumes must not pull the target up.
		rise := maxRise
		if s.idle > lagPeriods {
			// The signal has confirmed for longer than its lag that
			// far less is admitted than could be: catch up faster.
			rise = fastRise
		}
		f := min(math.Pow(est*s.corr/s.target, estGain), rise)
		if l < 1 {
			// Below target the CPU has room: whatever the estimate
			// says (it reads low when demand, not the plan, limited
			// what was admitted, as when a spike ends), never cut.
			f = max(f, 1)
		}
		s.target *= f
	default:
		f := math.Pow(min(max(load, minLoad), maxLoad), -fallbackGain)
		if s.idle > lagPeriods {
			// Idle for longer than the signal's lag with too little
			// admitted to estimate from (an I/O-bound service reads a
			// few per cent of its CPU at full throughput): climb as the
			// estimate does when idle. A target cut to nothing while a
			// descriptor limit stalled the accept loop took 2.5 s to
			// climb back at the fallback's 23 % a period (the files
			// lab's runs that did not recover).
			f = max(f, fastRise)
		}
		s.target *= f
	}
	// Not far above demand (a target that ran away would admit a
	// whole flood at once), but a period in which the process was
	// stalled and nothing arrived does not pull it below the capacity
	// learned before the episode.
	s.target = min(s.target, max(1.5*in.R, s.capEst))
	s.target = max(s.target, 1e-3)
	if load > learnLoad && load <= 1.2 && steady {
		s = s.learnCapacity(lagged/load, load, ac)
	}
	return s
}

// learnCapacity moves the capacity estimate towards est, read at load l,
// by the share a, and the ceiling (capCeil) towards that reading's
// ceiling; the first reading is taken as it is (smoothed up from
// nothing, a capacity first learned in an episode would start an order
// of magnitude low and take seconds to recover). Both are means of
// bounds, and a mean of floors (of ceilings) of a capacity is one too;
// a ceiling computed from the mean load would not be (blending light-load
// readings with later ones near the target, it fell below the capacity).
func (s law) learnCapacity(est, l, a float64) law {
	high := est * max(1, l*(1-idleMax)/(l-idleMax)) // l > learnLoad > idleMax: at most 3.4 × est
	if s.capEst == 0 {
		s.capEst, s.capHigh = est, high
	} else {
		s.capEst = smooth.Toward(s.capEst, est, a)
		s.capHigh = smooth.Toward(s.capHigh, high, a)
	}
	return s
}

// capCeil returns the most the capacity can be, given what was learned
// (idleMax): the estimate itself when it was learned at the target, up
// to 3.4 times it when learned at learnLoad, 0 when nothing was
// learned. A flood is judged against it, and an episode's aim is capped
// by it; the estimate is the floor.
func (s law) capCeil() float64 {
	return max(s.capHigh, s.capEst)
}
