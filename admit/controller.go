package admit

import (
	"context"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/fairq"
)

// Tuning constants of the control loop (see doc.go).
const (
	estGain      = 0.35 // per period, towards the capacity estimate
	fallbackGain = 0.3  // per period, (value/target)^-gain when nothing was admitted
	integralGain = 0.01 // per period, of the slow load-error integral
	// boundarySlack is how far above its aim the admitted rate may stay
	// (as a share of the aim) to keep a criticality boundary clean: with
	// every lower level shed, a shed rate this small is not taken from the
	// next level, and the load error it causes is not integrated.
	boundarySlack   = 0.05
	rateJump        = 1.5 // a change of the arrival rate by this factor is taken at once
	minLoad         = 0.5 // readings are clamped to [minLoad, maxLoad] ×target
	maxLoad         = 2.0
	rateTau         = time.Second            // smoothing of arrival rates (floods are taken at once)
	admTau          = 200 * time.Millisecond // smoothing of the admitted rate
	capTau          = time.Second            // smoothing of the capacity estimate
	shareTau        = 2 * time.Second        // smoothing of the split between criticalities
	retryTau        = 5 * time.Second        // smoothing of the retry share
	retryBudget     = 0.1                    // the default retry budget ratio (retry.DefaultBudget)
	noRetryOn       = 2 * retryBudget        // NoRetry above this retry share
	noRetryOff      = 0.9 * noRetryOn        // and off again below this
	episodeHold     = 500 * time.Millisecond // no shedding for this long ends an overload episode
	endLoad         = 0.95                   // ... if the load is also below this
	minRetryAfter   = 100 * time.Millisecond
	maxRetryAfter   = time.Minute
	defaultRecovery = time.Second // Retry-After before any episode was observed
	// clockTick refreshes the coarse clock between Admits' own refreshes
	// (one in lateClockEvery): a 1 ms ticker cost a one-core server about
	// 10% of its CPU under load; under load the Admits keep the clock
	// fresh, and when idle 10 ms is precise enough for deadlines.
	clockTick      = 10 * time.Millisecond
	lateClockEvery = 16 // while Run is active, one Admit in this many reads the clock
	lateSteps      = 2  // ... and steps when the last Step is this many periods old
	serviceShift   = 6  // one ticket in 2^serviceShift measures its service time
	minSampleShift = 3  // at most one request in 8 is sampled for tenant accounting
	ringTarget     = fairq.RingSize / 2
	lagPeriods     = 2                      // periods before a change shows in the signal
	maxRise        = 1.1                    // the target rises at most this much a period
	fastRise       = 1.5                    // ... or this much once the signal has read below minLoad for lagPeriods+1 periods
	drainTime      = 250 * time.Millisecond // drain a flood's backlog over about this long
	// Arrivals jumping above floodJump × the capacity estimate start
	// shedding before the signal shows the flood.
	floodJump = 2.0
)

// counter is an atomic counter alone on its cache line.
type counter struct {
	atomic.Uint64
	_ [56]byte
}

// Controller is a server-side admission controller. Admit decides per
// request (lock-free, allocation-free); Step, called every period by Run or
// by a simulator with virtual time, reads the signals and publishes what
// Admit applies. All methods are safe for concurrent use. The zero value is
// not usable: call New.
type Controller struct {
	// Read by every Admit.
	plan        atomic.Pointer[plan]
	overErr     [levee.NumCriticalities]atomic.Pointer[levee.RejectedError]
	clock       atomic.Int64 // coarse unix ns, refreshed by Run and Step
	stepped     atomic.Int64 // unix ns of the last Step
	running     atomic.Bool  // Run is refreshing the clock and stepping
	stepping    atomic.Bool  // an Admit is running a late step
	sampleShift atomic.Uint32
	loadBits    atomic.Uint64
	off         uint64 // seed offset of the Weyl sequences
	seed        uint64
	routeFn     func(ctx context.Context) string
	defRoute    uint64
	quotas      map[string]*quotaState
	deg         *degrade.Controller
	cfg         config

	// Written by Admit and Done.
	arrivals   [levee.NumCriticalities]counter
	retried    counter
	rejected   [levee.NumCriticalities][NumReasons]atomic.Uint64
	downstream atomic.Uint64
	gone       atomic.Uint64
	ring       fairq.Ring
	routes     routeTable
	runq       runQueue

	// Preallocated rejection errors.
	errDeadline *levee.RejectedError
	overTable   [2][raSteps]levee.RejectedError // [noRetry][retry-after index]
	quotaTable  [raSteps]levee.RejectedError

	// Control state, owned by Step under mu.
	mu          sync.Mutex
	tracker     *fairq.Tracker
	last        time.Time
	prevArr     [levee.NumCriticalities]uint64
	prevRej     [levee.NumCriticalities][NumReasons]uint64
	prevRetried uint64
	rate        [levee.NumCriticalities]float64 // eligible arrivals per rank, smoothed
	rateInit    bool
	share       [levee.NumCriticalities]float64 // the same, smoothed slowly
	admRate     float64
	capEst      float64
	shedding    bool
	target      float64 // admitted-rate target while shedding
	lastShed    time.Time
	epStart     time.Time
	recovery    time.Duration // smoothed episode length
	episodes    int
	retryRate   float64
	totalRate   float64
	noRetry     bool
	prevLevel   degrade.Level
	drill       bool
	retryIdx    int
	snap        Snapshot
	heavy       []fairq.Tenant
	admHist     [lagPeriods + 2]float64 // admitted above capacity, per period
	histPos     int
	capStart    float64    // capacity estimate when the episode started
	drain       float64    // estimated backlog (requests) still to drain
	admCnt      [2]float64 // admitted in the last two periods (newest first)
	prevLoad    float64
	corr        float64                 // integral correction of the estimate
	snapped     bool                    // the last plan held a criticality boundary
	sawOver     bool                    // the signal showed load > 1 during the drain
	under       int                     // consecutive periods with load < 1 while shedding
	idle        int                     // consecutive periods with load < minLoad while shedding
	lastLoad    float64                 // the previous reading
	rateHist    [lagPeriods + 1]float64 // admitted rate, last periods
	ratePos     int
	flood       bool    // the last Step saw a flood in the arrivals
	runMean     float64 // requests running at once while healthy, scaled to load 1
	runLimit    float64 // the run queue's bound; 0 = none yet
	runFloor    float64
}

// New returns a Controller configured by opts. Without WithSignals it never
// sheds for overload; deadlines and quotas still apply.
func New(opts ...Option) *Controller {
	cfg := config{period: DefaultPeriod, runWait: DefaultRunWait}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.degrade == nil {
		cfg.degrade = degrade.New()
	}
	c := &Controller{
		cfg:         cfg,
		deg:         cfg.degrade,
		seed:        cfg.seed,
		off:         fairq.Mix(cfg.seed),
		routeFn:     cfg.route,
		defRoute:    fairq.Hash(cfg.seed, ""),
		tracker:     fairq.NewTracker(0),
		errDeadline: &levee.RejectedError{Reason: levee.Deadline, NoRetry: true},
		recovery:    defaultRecovery,
	}
	if len(cfg.quotas) > 0 {
		c.quotas = make(map[string]*quotaState, len(cfg.quotas))
		for _, q := range cfg.quotas {
			c.quotas[q.tenant] = newQuotaState(q.q)
		}
	}
	for i := range raSteps {
		d := raValue(i)
		c.overTable[0][i] = levee.RejectedError{Reason: levee.Overloaded, RetryAfter: d}
		c.overTable[1][i] = levee.RejectedError{Reason: levee.Overloaded, RetryAfter: d, NoRetry: true}
		c.quotaTable[i] = levee.RejectedError{Reason: levee.Quota, RetryAfter: d}
	}
	c.runq.init()
	if cfg.runWait > 0 && cfg.runBound > 0 {
		c.runq.limit.Store(int64(cfg.runBound))
	}
	c.runFloor = float64(max(4, 2*runtime.GOMAXPROCS(0)))
	c.sampleShift.Store(minSampleShift)
	c.retryIdx = raIndex(defaultRecovery)
	c.publishErrors()
	return c
}

// retryAfter returns the Retry-After advice for criticality cr given the
// base (Sheddable) advice: deferrable work (SheddablePlus) waits twice as
// long.
func retryAfterFor(cr levee.Criticality, base int) int {
	if cr == levee.SheddablePlus {
		return min(base+8, raSteps-1) // ×2
	}
	return base
}

func (c *Controller) publishErrors() {
	nr := 0
	if c.noRetry {
		nr = 1
	}
	for cr := range levee.NumCriticalities {
		c.overErr[cr].Store(&c.overTable[nr][retryAfterFor(levee.Criticality(cr), c.retryIdx)])
	}
}

// Step runs one control period ending at now: it reads the signals and the
// counters, steps the degradation controller, steers the admitted rate and
// publishes the shedding plan and the rejection errors. Call it every
// period (Run does) with a non-decreasing now; virtual time is fine.
func (c *Controller) Step(now time.Time) {
	events := c.step(now)
	for _, e := range events {
		c.emit(e)
	}
}

func (c *Controller) step(now time.Time) []Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock.Store(now.UnixNano())
	c.stepped.Store(now.UnixNano())
	dt := now.Sub(c.last)
	if c.last.IsZero() {
		dt = c.cfg.period
	}
	if dt <= 0 {
		return nil
	}
	c.last = now
	sec := dt.Seconds()
	ar := 1 - math.Exp(-sec/rateTau.Seconds())
	aadm := 1 - math.Exp(-sec/admTau.Seconds())
	ac := 1 - math.Exp(-sec/capTau.Seconds())
	aretry := 1 - math.Exp(-sec/retryTau.Seconds())

	// Signals.
	load := 0.0
	c.snap.Signals = c.snap.Signals[:0]
	for _, s := range c.cfg.signals {
		v, t := s.Value(), s.Target()
		c.snap.Signals = append(c.snap.Signals, SignalState{Name: s.Name(), Value: v, Target: t})
		if !math.IsNaN(v) && t > 0 && v/t > load {
			load = v / t
		}
	}
	if math.IsInf(load, 0) {
		load = 100
	}
	c.loadBits.Store(math.Float64bits(load))

	// Counters → rates.
	var totalArr, totalAdm float64
	var rateNow [levee.NumCriticalities]float64
	for cr := range levee.NumCriticalities {
		a := c.arrivals[cr].Load()
		var rej [NumReasons]uint64
		for r := range NumReasons {
			rej[r] = c.rejected[cr][r].Load()
		}
		dA := a - c.prevArr[cr]
		dD := rej[levee.Deadline] - c.prevRej[cr][levee.Deadline]
		dQ := rej[levee.Quota] - c.prevRej[cr][levee.Quota]
		dO := rej[levee.Overloaded] - c.prevRej[cr][levee.Overloaded]
		elig := float64(dA) - float64(dD) - float64(dQ)
		rateNow[levee.Criticality(cr).Rank()] = max(0, elig) / sec
		totalAdm += max(0, elig-float64(dO)) / sec
		totalArr += float64(dA) / sec
		c.prevArr[cr], c.prevRej[cr] = a, rej
	}
	ash := 1 - math.Exp(-sec/shareTau.Seconds())
	for r := range c.share {
		if !c.rateInit {
			c.share[r] = rateNow[r]
		} else {
			c.share[r] += ash * (rateNow[r] - c.share[r])
		}
	}
	// Arrival rates: smoothed over a second (their noise would move the
	// ladder position every period), but a flood or a drop of a third or
	// more is taken at once.
	var total, totalNow float64
	for r := range c.rate {
		total += c.rate[r]
		totalNow += rateNow[r]
	}
	// In counts per period, with a margin of three Poisson deviations so
	// that arrival noise at low rates is not taken for a change.
	exp, got := total*sec, totalNow*sec
	margin := 3 * math.Sqrt(exp)
	wasInit := c.rateInit
	// A drop seen while the signal reads overloaded is more likely the
	// process falling behind on reading requests (a saturated one-core
	// process runs its connection goroutines late) than the clients going
	// away: taken at once, it would raise the admitted fraction just as
	// the backlog grows. It is smoothed like any other change.
	drop := got < exp/rateJump-margin-1 && !(c.shedding && load > 1)
	jump := !c.rateInit || got > rateJump*exp+margin+1 || drop
	// Shedding while the signal reads below half its target: the arrivals
	// have fallen (a spike ended) and the smoothed rate, kept high for a
	// second, would go on shedding most of what follows. Take the period's
	// count as it is.
	jump = jump || (c.shedding && load < minLoad && got < exp)
	for r := range c.rate {
		if jump {
			c.rate[r] = rateNow[r]
		} else {
			c.rate[r] += ar * (rateNow[r] - c.rate[r])
		}
	}

	if !c.rateInit {
		c.admRate = totalAdm
	} else {
		c.admRate += aadm * (totalAdm - c.admRate)
	}
	c.rateInit = true
	var R float64
	for _, r := range c.rate {
		R += r
	}

	// Retry share.
	rt := c.retried.Load()
	c.retryRate += aretry * (float64(rt-c.prevRetried)/sec - c.retryRate)
	c.totalRate += aretry * (totalArr - c.totalRate)
	c.prevRetried = rt
	share := 0.0
	if c.totalRate > 0 {
		share = c.retryRate / c.totalRate
	}

	// Tenant samples: adapt the sampling ratio to keep the ring half full.
	shift := c.sampleShift.Load()
	weight := float64(uint64(1) << shift)
	c.ring.Drain(func(v uint64) { c.tracker.Add(v, weight) })
	c.tracker.Step(now, dt)
	perPeriod := totalArr * sec
	ns := uint32(minSampleShift)
	for ns < 40 && perPeriod/float64(uint64(1)<<ns) > ringTarget {
		ns++
	}
	c.sampleShift.Store(ns)

	// A flood seen in the arrivals before the signal: the rate jumped to
	// more than floodJump times the capacity learned so far. The signal
	// shows it a period or two later, and by then the requests admitted
	// meanwhile (on a one-core server with 1 ms requests, 0.1 s of a 5×
	// flood is 0.5 s of work) have stalled the process and filled the
	// kernel's queues with requests that will expire before they are read.
	// It raises the degradation level at once and starts shedding at the
	// next Step if the arrivals are still that high (degradation must
	// strictly precede the first rejection).
	flood := !c.shedding && c.capEst > 0 && R > floodJump*c.capEst && (wasInit && jump || c.flood)
	wasFlood := c.flood
	c.flood = flood && !wasFlood

	// Degradation first: it must lead shedding by at least one period.
	prevLevel := c.prevLevel
	dload := load
	if flood {
		dload = max(load, R/c.capEst)
	}
	level := c.deg.StepAt(now, dload)

	// Capacity estimate: the admitted rate that would put the load at 1,
	// from the admitted rate lagPeriods ago (what the signal reflects now),
	// only while the rate is steady and the signal not saturated.
	lagged := c.rateHist[(c.ratePos+1)%len(c.rateHist)]
	c.rateHist[c.ratePos%len(c.rateHist)] = c.admRate
	c.ratePos++
	steady := lagged > 0 && math.Abs(c.admRate-lagged) <= 0.2*lagged &&
		math.Abs(load-c.lastLoad) <= 0.1*load // a reading still moving is not aligned with the rate
	c.lastLoad = load
	if !c.shedding && load > 0.2 && load <= 1 && steady {
		est := lagged / load
		if c.capEst == 0 {
			c.capEst = est
		} else {
			c.capEst += ac * (est - c.capEst)
		}
	}

	// The control law (see doc.go): on entry, start from the capacity
	// estimate and drain the queue the flood built before it was seen; then
	// move the admitted-rate target towards admitted ÷ load (lag-aligned),
	// with a slow integral of the load error.
	var events []Event
	wasShedding := c.shedding
	admCount := totalAdm * sec
	c.admHist[c.histPos%len(c.admHist)] = admCount - c.capEst*sec
	c.histPos++
	if !c.shedding && R > 0 && prevLevel > 0 && (load > 1 || flood && wasFlood) {
		c.shedding = true
		c.epStart = now
		// A delay signal is not proportional to the admitted rate: a spike
		// of it says "over", not by how much. Clamp as the law does.
		base := c.admRate
		if c.capEst > 0 {
			// The admitted rate reads low when the flood stalled the
			// process (nothing reached the handlers for a few periods):
			// the estimate learned before the episode is the better base.
			base = max(base, c.capEst)
		}
		c.target = base / min(load, maxLoad)
		if c.capEst > 0 && c.capEst < c.target {
			c.target = c.capEst
		}
		c.capStart = c.target
		c.drain = 0
		c.sawOver = false
		c.under, c.idle = 0, 0
		if c.capEst > 0 { // without an estimate there is no model to drain by
			for _, x := range c.admHist {
				c.drain += max(0, x)
			}
		}
		c.corr = 1
	} else if c.shedding {
		if load < 1 {
			c.under++
		} else {
			c.under = 0
		}
		if load < minLoad {
			c.idle++
		} else {
			c.idle = 0
		}
		switch {
		case c.drain > 0 && load < 1 && (c.sawOver || c.under > lagPeriods):
			// The signal, after showing the overload, shows the backlog
			// gone; or it never showed one within the lag it has (the
			// entry was a spike of a delay signal, not a flood).
			c.drain = 0
		case c.drain > 0:
			c.sawOver = c.sawOver || load > 1
			// The signal is saturated by the backlog: steer by the model
			// (backlog shrinks by capacity − admitted) instead of
			// integrating a reading that cannot say how far over we are.
			c.drain -= c.capStart*sec - admCount
			if c.drain <= 0.5*c.capStart*sec {
				c.drain = 0
			}
		case c.admCnt[0]+c.admCnt[1] >= 4 && load > 0.05:
			// The signal now reflects what was admitted lagPeriods−1 and
			// lagPeriods periods ago; admitted ÷ load over those periods is
			// the admitted rate that puts the load at 1, and the arrival
			// noise in both cancels. Move part of the way to it.
			l := min(max(load, minLoad), maxLoad)
			est := (c.admCnt[0] + c.admCnt[1]) / ((l + c.prevLoad) * sec)
			// A slow integral of the load error removes what the estimate
			// cannot see (admissions below the aim, work that is not
			// proportional to admissions).
			if !c.snapped || l > 1+boundarySlack || l < 1 {
				c.corr = min(max(c.corr*math.Pow(l, -integralGain), 0.7), 1.4)
			}
			// Rises are limited to 10% a period: a reading that lags more
			// than the estimate assumes must not pull the target up.
			rise := maxRise
			if c.idle > lagPeriods {
				// The signal has confirmed for longer than its lag that
				// far less is admitted than could be: catch up faster.
				rise = fastRise
			}
			f := min(math.Pow(est*c.corr/c.target, estGain), rise)
			if l < 1 {
				// Below target the CPU has room: whatever the estimate
				// says (it reads low when demand, not the plan, limited
				// what was admitted, as when a spike ends), never cut.
				f = max(f, 1)
			}
			c.target *= f
		default:
			c.target *= math.Pow(min(max(load, minLoad), maxLoad), -fallbackGain)
		}
		// Not far above demand (a target that ran away would admit a
		// whole flood at once), but a period in which the process was
		// stalled and nothing arrived does not pull it below the capacity
		// learned before the episode.
		c.target = min(c.target, max(1.5*R, c.capEst))
		c.target = max(c.target, 1e-3)
		if load > 0.2 && load <= 1.2 && steady {
			c.capEst += ac * (lagged/load - c.capEst)
		}
	}
	c.admCnt[1], c.admCnt[0] = c.admCnt[0], admCount
	c.prevLoad = min(max(load, minLoad), maxLoad)
	aim := c.target
	if c.drain > 0 {
		aim = max(0.1*c.capStart, c.capStart-c.drain/drainTime.Seconds())
	}
	shed := 0.0
	if c.shedding {
		shed = max(0, R-aim)
		if shed > 0 {
			c.lastShed = now
		} else if now.Sub(c.lastShed) >= episodeHold && load < endLoad {
			c.shedding = false
			d := c.lastShed.Sub(c.epStart) + c.cfg.period
			if c.episodes == 0 {
				c.recovery = d
			} else {
				c.recovery = (c.recovery + d) / 2
			}
			c.episodes++
		}
	}

	c.stepRunQueue(now, load, level > 0, flood)

	// Map the shed rate onto tenants and the ladder.
	capacity := c.capEst
	if c.shedding {
		capacity = c.target
	}
	active := max(1, c.tracker.Active())
	fair := capacity / active
	var res planResult
	if shed > 0 {
		c.heavy = c.tracker.Top(c.heavy[:0], fair)
		// A tenant's sampled rate is noisy, and its errors do not cancel
		// in the plan: an overestimate is clipped to the arrival rate,
		// an underestimate leaves a phantom share to "other tenants" that
		// nobody uses (with one tenant at 87% shed, 5% of sampling error
		// admitted 17% less than the aim). Its share of all samples,
		// smoothed alike, has no such error: scale the rates by it.
		var sampled float64
		for _, v := range c.tracker.All() {
			sampled += v
		}
		if sampled > 0 {
			k := R / sampled
			for i := range c.heavy {
				for cl := range c.heavy[i].Rate {
					c.heavy[i].Rate[cl] *= k
				}
			}
		}
		// The split between ranks comes from the slow per-rank rates, the
		// total from the fast one: the ladder position does not jitter
		// with each period's arrivals.
		var mix [levee.NumCriticalities]float64
		var sum float64
		for _, v := range c.share {
			sum += v
		}
		for r := range mix {
			if sum > 0 {
				mix[r] = R * c.share[r] / sum
			}
		}
		res = buildPlan(planInput{shed: shed, rate: mix, tenants: c.heavy, fair: fair,
			period: budgetPeriod(dt, c.cfg.period), slack: boundarySlack * aim})
		if res.p != nil && res.p.hasTenants {
			// Each plan continues the listed tenants' sequences where the
			// arrivals have got to: restarting them at 0 every period would
			// replay the same first few hundred points of the Weyl sequence,
			// whose error at a small admitted share (a few requests a
			// period) then repeats every period instead of averaging out.
			var n uint64
			for cr := range c.prevArr {
				n += c.prevArr[cr]
			}
			res.p.startTenants(n)
		}
	}
	c.snapped = res.snapped
	c.plan.Store(res.p)

	// Retry advice.
	ra := c.recovery
	if c.shedding {
		ra = max(ra, now.Sub(c.epStart))
	}
	ra = min(max(ra, minRetryAfter), maxRetryAfter)
	noRetry := c.noRetry
	if share > noRetryOn {
		noRetry = true
	} else if share < noRetryOff {
		noRetry = false
	}
	if idx := raIndex(ra); idx != c.retryIdx || noRetry != c.noRetry {
		changed := noRetry != c.noRetry
		c.retryIdx, c.noRetry = idx, noRetry
		c.publishErrors()
		if changed {
			k := NoRetryEnd
			if noRetry {
				k = NoRetryStart
			}
			events = append(events, Event{Kind: k})
		}
	}

	// Snapshot state and events.
	s := &c.snap
	s.Time = now
	s.Overloaded = c.shedding
	s.Load = load
	s.ShedLevel = res.level
	s.AdmitFraction = 1
	if shed > 0 && R > 0 {
		s.AdmitFraction = c.target / R
	}
	s.DegradeLevel = level
	if wasShedding {
		s.ShedSeconds += sec
	}
	if prevLevel > 0 {
		s.DegradedSeconds += sec
	}
	s.RetryShare = share
	s.NoRetry = c.noRetry
	s.RetryAfter = c.overTable[0][c.retryIdx].RetryAfter
	s.CapacityRPS = capacity
	s.FairShareRPS = fair
	s.ActiveTenants = int(math.Round(c.tracker.Active()))
	s.OfferedRPS = R
	s.TenantShedRPS = res.tenantShed
	s.Routes = c.routes.routes()

	if c.shedding != wasShedding {
		k := OverloadEnd
		if c.shedding {
			k = OverloadStart
		}
		events = append(events, Event{Kind: k})
	}
	if level != prevLevel {
		events = append(events, Event{Kind: DegradeChanged})
	}
	_, _, drill := c.deg.Forced(now)
	if drill != c.drill {
		k := DrillEnd
		if drill {
			k = DrillStart
		}
		events = append(events, Event{Kind: k})
		c.drill = drill
	}
	c.prevLevel = level
	if len(events) > 0 && (c.cfg.observer != nil || c.cfg.logger != nil) {
		snap := c.snapshotLocked()
		for i := range events {
			events[i].Time = now
			events[i].Snapshot = snap
		}
		return events
	}
	return nil
}

func (c *Controller) emit(e Event) {
	if c.cfg.observer != nil {
		c.cfg.observer(e)
	}
	l := c.cfg.logger
	if l == nil {
		return
	}
	s := &e.Snapshot
	switch e.Kind {
	case OverloadStart:
		l.Warn("admit: overloaded, shedding", "load", s.Load, "capacity_rps", s.CapacityRPS, "offered_rps", s.OfferedRPS)
	case OverloadEnd:
		l.Info("admit: overload over", "load", s.Load, "shed_seconds", s.ShedSeconds)
	case DegradeChanged:
		l.Info("admit: degradation level changed", "level", int(s.DegradeLevel), "load", s.Load)
	case DrillStart:
		l.Info("admit: degradation drill started", "level", int(s.DegradeLevel))
	case DrillEnd:
		l.Info("admit: degradation drill ended", "level", int(s.DegradeLevel))
	case NoRetryStart:
		l.Warn("admit: high retry share, rejections say no-retry", "retry_share", s.RetryShare)
	case NoRetryEnd:
		l.Info("admit: retry share back to normal", "retry_share", s.RetryShare)
	default:
		l.Log(context.Background(), slog.LevelInfo, "admit: "+e.Kind.String())
	}
}

// Run calls Step every period with the real time and refreshes the coarse
// clock Admit reads every 10 ms, until ctx is done. Run one Run per
// Controller.
//
// A saturated process runs timer goroutines late (behind the runnable
// handlers in Go's run queue, or behind other processes for a core): that
// is exactly when the controller must act. So while Run is active, one
// Admit in lateClockEvery also reads the clock, and when the last Step is
// more than lateSteps periods old that Admit samples the signals that can
// be sampled (a SampleAt(time.Time) method, as package pressure's have)
// and runs the Step itself: control follows the requests, not the timers.
func (c *Controller) Run(ctx context.Context) {
	step := time.NewTicker(c.cfg.period)
	defer step.Stop()
	tick := time.NewTicker(clockTick)
	defer tick.Stop()
	c.running.Store(true)
	defer c.running.Store(false)
	c.Step(time.Now())
	for {
		select {
		case <-ctx.Done():
			c.clock.Store(0)
			return
		case now := <-tick.C:
			c.clock.Store(now.UnixNano())
		case now := <-step.C:
			// A late step run by Admit may have just happened: a step
			// over a sliver of a period would read noise as rates.
			if now.UnixNano()-c.stepped.Load() >= int64(c.cfg.period)/2 {
				c.Step(now)
			}
		}
	}
}

// sampler is a signal that can be sampled on demand (package pressure's
// signals are).
type sampler interface{ SampleAt(time.Time) }

// late is called by one Admit in lateClockEvery while Run is active: it
// refreshes the clock and, if Run's timer is late, steps in its place.
func (c *Controller) late() int64 {
	t := time.Now()
	now := t.UnixNano()
	c.clock.Store(now)
	if now-c.stepped.Load() < lateSteps*int64(c.cfg.period) || !c.stepping.CompareAndSwap(false, true) {
		return now
	}
	for _, s := range c.cfg.signals {
		if sm, ok := s.(sampler); ok {
			sm.SampleAt(t)
		}
	}
	c.Step(t)
	c.stepping.Store(false)
	return now
}

// Snapshot returns the state as of the last Step, with cumulative counters
// read now. Safe for concurrent use; it allocates the Signals slice.
func (c *Controller) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

func (c *Controller) snapshotLocked() Snapshot {
	s := c.snap
	s.Signals = append([]SignalState(nil), c.snap.Signals...)
	for cr := range levee.NumCriticalities {
		a := c.arrivals[cr].Load()
		var rej uint64
		for r := range NumReasons {
			v := c.rejected[cr][r].Load()
			s.Rejected[cr][r] = v
			rej += v
		}
		if a > rej {
			s.Admitted[cr] = a - rej
		}
	}
	s.DownstreamOverloaded = c.downstream.Load()
	s.CallerGone = c.gone.Load()
	s.Running, s.Waiting = int(c.runq.running.Load()), int(c.runq.waiting.Load())
	if b := c.runq.limit.Load(); b < runCount {
		s.RunBound = int(b)
	}
	return s
}

// Load returns the maximum over signals of value ÷ target at the last Step
// (1.0 = at target; 0 before the first Step), for the Levee-Load header. It
// is one atomic load.
func (c *Controller) Load() float64 { return math.Float64frombits(c.loadBits.Load()) }

// Degrade returns the degradation controller the Controller steps.
func (c *Controller) Degrade() *degrade.Controller { return c.deg }

// budgetPeriod is the time the next plan's budget must last: the control
// period, or the last interval between Steps if that was longer.
func budgetPeriod(dt, period time.Duration) float64 {
	return max(dt, period).Seconds()
}

// TenantRate returns the estimated arrival rate (requests per second, all
// criticalities) of tenant if it is among the heavy hitters the controller
// tracks, and 0 otherwise. It takes the controller's lock: for status pages
// and tests, not for the request path.
func (c *Controller) TenantRate(tenant string) float64 {
	if tenant == "" {
		return 0
	}
	key := fairq.Key(fairq.Hash(c.seed, tenant))
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tracker.Rate(key)
}

// Run-queue tuning (see WithRunQueue).
const (
	runTau      = 2 * time.Second // smoothing of the healthy running count
	runHeadroom = 2.0             // the bound is this many times the healthy count
	runGrow     = 1.25            // per period while requests wait and the signals have room
	runRoom     = 0.8             // ... below this load
	runBusy     = 0.5             // below this load (nothing shed or degraded) the queue is off
)

// stepRunQueue learns the run queue's bound, publishes it (or turns the
// queue off while the server is not busy), grants the slots a raised bound
// frees and expires waits that are too long.
func (c *Controller) stepRunQueue(now time.Time, load float64, degraded, flood bool) {
	if c.cfg.runWait <= 0 {
		return
	}
	q := &c.runq
	if c.cfg.runBound > 0 {
		q.limit.Store(int64(c.cfg.runBound))
		q.expire(now.UnixNano() - int64(c.cfg.runWait))
		return
	}
	counting := q.on()
	running := float64(q.running.Load())
	if counting && !c.shedding && !flood && load >= runBusy && load <= 1 {
		// Busy but not overloaded (degraded is fine: the level rises
		// below target): what runs at once now, scaled to the load at
		// target.
		est := running / load
		if c.runMean == 0 {
			c.runMean = est
		} else {
			c.runMean += (1 - math.Exp(-c.cfg.period.Seconds()/runTau.Seconds())) * (est - c.runMean)
		}
	}
	if c.runMean > 0 {
		c.runLimit = max(c.runLimit, runHeadroom*c.runMean, c.runFloor)
		if q.waiting.Load() > 0 && !c.shedding && load < runRoom {
			// Requests wait while the signals have room: the bound, not
			// the server, is short (a slower dependency needs more
			// requests in flight, not fewer).
			c.runLimit *= runGrow
			c.runMean = max(c.runMean, c.runLimit/runHeadroom)
		} else {
			// Back towards the learned bound.
			c.runLimit = max(runHeadroom*c.runMean, c.runFloor, c.runLimit*0.95)
		}
	}
	switch {
	case !(c.shedding || degraded || flood || load >= runBusy):
		q.limit.Store(runOff)
	case c.runMean > 0:
		q.limit.Store(int64(math.Ceil(c.runLimit)))
	default:
		q.limit.Store(runCount)
	}
	q.expire(now.UnixNano() - int64(c.cfg.runWait))
}
