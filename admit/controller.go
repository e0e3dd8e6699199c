package admit

import (
	"context"
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
	clockTick       = 10 * time.Millisecond
	lateClockEvery  = 16                     // while Run is active, one Admit in this many reads the clock
	lateSteps       = 2                      // ... and steps when the last Step is this many periods old
	planLife        = 4                      // a plan not refreshed for this many periods is not applied
	serviceShift    = 6                      // one ticket in 2^serviceShift measures its service time
	initSampleShift = 3                      // one request in 8 is sampled for tenant accounting until the first Step
	ringTarget      = fairq.RingSize / 8     // samples a period, at most about (Step adapts the ratio)
	lagPeriods      = 2                      // periods before a change shows in the signal
	maxRise         = 1.1                    // the target rises at most this much a period
	fastRise        = 1.5                    // ... or this much once the signal has read below minLoad for lagPeriods+1 periods
	drainTime       = 250 * time.Millisecond // drain a flood's backlog over about this long
	delayHold       = 10                     // periods a delay's report of a drained backlog does not cut the target
	spikeHold       = 4                      // periods a delay spike with the utilisation below its target does not cut the target
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
//
// A Step is a sequence of stages, each its own type and file, each owning
// its state: the meter (meter.go: counters → rates, floods), the retry
// share (retryshare.go), the degradation controller (package degrade), the
// control law (law.go: a pure step function), the tenant plan
// (tenants.go, plan.go), the episodes behind Retry-After (episode.go), the
// run queue's bound (runbound.go) and the report (snapshot.go).
type Controller struct {
	// Read by every Admit.
	plan        atomic.Pointer[plan]
	surge       atomic.Pointer[surge]
	overErr     [levee.NumCriticalities]atomic.Pointer[levee.RejectedError]
	clock       atomic.Int64 // coarse clock (ns since origin) while Run is active, else 0
	stepped     atomic.Int64 // ns since origin of the last Step
	running     atomic.Bool  // Run is refreshing the clock and stepping
	stepping    atomic.Bool  // an Admit is running a late step
	sampleShift atomic.Uint32
	loadBits    atomic.Uint64
	off         uint64 // seed offset of the Weyl sequences
	seed        uint64
	routeFn     func(ctx context.Context) string
	defRoute    uint64
	quotas      atomic.Pointer[quotaSet] // nil: no quotas
	dry         atomic.Bool              // dry-run: read only where a request would be rejected
	forced      [numFloors]atomic.Pointer[forcedShed]
	deg         *degrade.Controller
	cfg         config
	origin      time.Time    // 0 of the controller's time scale (monotonic)
	clk         clock        // the real-time path's clock
	offset      atomic.Int64 // added to explicit times after a Step back in time
	unrunOnce   sync.Once
	quotaMu     sync.Mutex // serialises SetQuotas

	// Written by Admit and Done.
	arrivals   [levee.NumCriticalities]counter
	retried    counter
	rejected   [levee.NumCriticalities][levee.NumReasons]atomic.Uint64
	would      [levee.NumCriticalities][levee.NumReasons]atomic.Uint64 // dry-run: would have been rejected
	shedBy     [levee.NumCriticalities][NumStages]atomic.Uint64        // overload rejections by stage
	downstream atomic.Uint64
	gone       atomic.Uint64
	completed  counter // tickets done: what the handlers finished
	ring       fairq.Ring
	routes     routeTable
	solo       soloTime // service time of requests that ran alone (solo.go)
	runq       runQueue

	// Preallocated rejection errors.
	errDeadline *levee.RejectedError            // cannot be met
	errGone     *levee.RejectedError            // the same, for a request whose time is up (refused even in dry-run)
	overTable   [2][raSteps]levee.RejectedError // [noRetry][retry-after index]
	quotaTable  [raSteps]levee.RejectedError

	// Control state, owned by Step under mu: one field per stage.
	mu       sync.Mutex
	combine  combiner
	learners []learner // signals told when the controller sheds (signals.go)
	bursters []burster // signals that tell a burst from a standing queue (signals.go)
	unread   backlog   // the first signal that counts unread demand, or nil
	last     int64     // the last Step (the controller's scale)
	hasLast  bool
	meter    meter
	retry    retryShare
	law      law
	snapped  bool // the last plan held a criticality boundary (plan → law)
	tenants  tenants
	planned  planIn // the last Step's plan input, for a replan (forced.go)
	episodes episodes
	run      runBound
	stand    standing
	report   report
	retryIdx int  // Retry-After index of the published errors
	noRetry  bool // the published errors say no-retry
}

// New returns a Controller configured by opts. Without WithSignals it never
// sheds for overload; deadlines and quotas still apply.
func New(opts ...Option) *Controller {
	cfg := config{period: DefaultPeriod, runWait: DefaultRunWait, groups: DefaultPeerGroups}
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
		tenants:     newTenants(cfg.groups),
		episodes:    newEpisodes(),
		errDeadline: &levee.RejectedError{Reason: levee.Deadline, NoRetry: true},
		errGone:     &levee.RejectedError{Reason: levee.Deadline, NoRetry: true},
		origin:      time.Now(),
	}
	c.clk = monoClock{c.origin}
	util := make([]bool, len(cfg.signals))
	for i, s := range cfg.signals {
		_, util[i] = s.(saturating)
		if l, ok := s.(learner); ok {
			c.learners = append(c.learners, l)
		}
		if b, ok := s.(burster); ok {
			c.bursters = append(c.bursters, b)
		}
		if b, ok := s.(backlog); ok && c.unread == nil {
			c.unread = b
		}
	}
	c.combine = newCombiner(cfg.signals, util, cfg.period)
	c.report.snap.AdmitFraction = 1
	for _, s := range cfg.signals { // the snapshot lists the signals from the first instant
		c.report.snap.Signals = append(c.report.snap.Signals, SignalState{Name: s.Name(), Value: s.Value(), Target: s.Target()})
	}
	c.stepped.Store(c.clk.now()) // a new controller is as fresh as a stepped one
	if len(cfg.quotas) > 0 {
		qs := make(quotaSet, len(cfg.quotas))
		for _, q := range cfg.quotas {
			qs[q.tenant] = newQuotaState(q.q)
		}
		c.quotas.Store(&qs)
	}
	c.dry.Store(cfg.dryRun)
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
	if c.cfg.cores == nil {
		c.cfg.cores = func() int { return runtime.GOMAXPROCS(0) }
	}
	c.readCores()
	c.sampleShift.Store(initSampleShift)
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
// period (Run does); virtual time is fine. A now that is not after the
// previous Step's (a wall clock stepped back) is taken as one period
// later, and later times are measured from there.
func (c *Controller) Step(now time.Time) {
	c.emitAll(c.stepAt(now, 0, true))
}

// stepAt runs the period ending at t: an explicit time (Step) converted to
// the controller's scale here, or, when !explicit, the instant now of that
// scale read from the real clock, with t = timeAt(now) for the
// degradation controller and reports.
func (c *Controller) stepAt(t time.Time, now int64, explicit bool) stepOut {
	c.mu.Lock()
	defer c.mu.Unlock()
	if explicit {
		now = c.mono(t)
		if c.hasLast && now < c.last {
			c.offset.Add(c.last - now + int64(c.cfg.period))
			now = c.mono(t)
		}
	}
	c.stepped.Store(now)
	dt := now - c.last
	if !c.hasLast {
		dt = int64(c.cfg.period)
	}
	if dt <= 0 {
		return stepOut{}
	}
	c.last, c.hasLast = now, true
	sec := time.Duration(dt).Seconds()

	c.readCores()
	sig := c.readSignals()
	load := sig.load
	var cnt counts
	for cr := range levee.NumCriticalities {
		cnt.arrivals[cr] = c.arrivals[cr].Load()
		for r := range levee.NumReasons {
			cnt.rejected[cr][r] = c.rejected[cr][r].Load()
			cnt.would[cr][r] = c.would[cr][r].Load()
		}
	}
	cnt.completed = c.completed.Load()
	dry := c.dry.Load()
	unread := c.unreadNow()
	m := c.meter.step(meterIn{counts: cnt, dt: time.Duration(dt), load: load, shedding: c.law.shedding, capEst: c.law.capEst, capCeil: c.law.capCeil(),
		unread: unread, behind: unread > unreadBehind*c.run.procs})
	share, noRetry := c.retry.step(c.retried.Load(), m.arrived, time.Duration(dt))
	c.sampleShift.Store(c.tenants.observe(&c.ring, c.sampleShift.Load(), now, dt, m.arrived*sec))

	// Degradation first: it must lead shedding by at least one period. A
	// flood raises it at once, before the signal shows it.
	prevLevel := c.report.level
	dload := load
	if m.flood {
		dload = max(load, m.R/c.law.capEst)
	}
	level := c.deg.StepAt(t, dload)

	wasShedding := c.law.shedding
	var lo lawOut
	c.law, lo = c.law.step(lawIn{now: now, dt: time.Duration(dt), load: load, R: m.R, admRate: m.admRate,
		admitted: m.admitted, prop: sig.prop, over: sig.over, flood: m.flood, wasFlood: m.wasFlood, degraded: prevLevel > 0, snapped: c.snapped,
		dry: dry, bottleneck: c.bottleneck(sig, m.completed)})
	for _, l := range c.learners {
		l.SetShedding(c.law.shedding)
	}
	ra := c.episodes.step(episodeIn{now: now, shedding: c.law.shedding, epStart: c.law.epStart,
		ended: lo.ended, epLen: lo.epLen, period: c.cfg.period})

	c.stepRunQueue(now, load, level > 0, m.flood)

	var arrived uint64
	for _, a := range cnt.arrivals {
		arrived += a
	}
	prev := c.plan.Load()
	c.tenants.measure(prev, time.Duration(dt), m.eligible*sec)
	forced := c.forcedAt(now)
	floor := highest(forced)
	c.planned = planIn{shed: lo.shed, drain: lo.drain, R: m.R, mix: m.mix, capacity: lo.capacity, aim: lo.aim,
		period: budgetPeriod(time.Duration(dt), c.cfg.period), arrived: arrived, floor: floor}
	res, fair := c.tenants.plan(c.planned)
	c.snapped = res.snapped
	c.publishPlan(res.p, prev)
	c.surge.Store(armSurge(c.surge.Load(), cnt.arrivals, now, c.law.capEst, c.law.capCeil(), m.R, c.law.target, c.cfg.period.Seconds(), c.solo.seconds(), level > 0, c.law.shedding))

	noRetryChanged := c.publish(ra, noRetry)

	admitFraction := 1.0
	if lo.shed > 0 && m.R > 0 {
		admitFraction = c.law.target / m.R
	}
	return c.report.step(c, reportIn{
		t: t, now: now, sec: sec, load: load, level: level, wasShedding: wasShedding, shedding: c.law.shedding,
		shedLevel: res.level, admitFraction: admitFraction, share: share, capacity: lo.capacity,
		fair: fair, offered: m.R, tenantShed: c.tenants.cutRate, noRetryChanged: noRetryChanged,
		dry: dry, would: cnt.would, wouldShed: res.rate, forced: forced,
	})
}

// stepOut is what a Step reports once its lock is released: the state
// changes, and in dry-run the "would reject" line due.
type stepOut struct {
	events []Event
	dry    *dryLine
}

// emitAll reports a Step's changes to the observer and the logger.
func (c *Controller) emitAll(o stepOut) {
	for _, e := range o.events {
		c.emit(e)
	}
	if o.dry != nil {
		o.dry.log(c.logger())
	}
}

// publishPlan publishes p (nil: nothing shed), valid for planLife periods
// from the last Step, continuing prev's paces.
func (c *Controller) publishPlan(p, prev *plan) {
	if p != nil {
		p.until = c.last + planLife*int64(c.cfg.period)
		p.carry(prev, c.last)
	}
	c.plan.Store(p)
}

// readSignals reads every signal into the report and combines them (see
// signals.go).
func (c *Controller) readSignals() reading {
	st := c.report.snap.Signals[:0]
	for _, s := range c.cfg.signals {
		st = append(st, SignalState{Name: s.Name(), Value: s.Value(), Target: s.Target()})
	}
	c.report.snap.Signals = st
	r := c.combine.step(st)
	c.loadBits.Store(math.Float64bits(r.load))
	return r
}

// bursting reports that a signal says the queue is a burst being
// absorbed (signals.go's burster).
func (c *Controller) bursting() bool {
	for _, b := range c.bursters {
		if b.Bursting() {
			return true
		}
	}
	return false
}

// unreadNow returns the demand waiting unread (signals.go's backlog): the
// signal's count less the handlers holding a run slot, which it counts
// too when the scheduler has preempted them; NaN when no signal counts.
func (c *Controller) unreadNow() float64 {
	if c.unread == nil {
		return math.NaN()
	}
	u := c.unread.Unread()
	if math.IsNaN(u) {
		return u
	}
	return max(0, u-float64(c.runq.running.Load()))
}

// readCores takes the process's cores (WithCores) for the run queue's
// bound and the unread demand's threshold. Under c.mu, or before the
// controller is shared.
func (c *Controller) readCores() {
	n := float64(max(1, c.cfg.cores()))
	c.run.floor = max(4, 2*n)
	c.run.procs = n
}

// bottleneck returns the throughput of the bottleneck the binding signal
// watches, when it is over its target and watches one (see signals.go),
// else 0: the signal's own measure, or until it has one, the rate the
// handlers completed requests at in the period (completed): while requests
// wait for a saturated bottleneck, that is what it serves.
func (c *Controller) bottleneck(r reading, completed float64) float64 {
	if r.bind < 0 || !(r.load > 1) {
		return 0
	}
	b, ok := c.cfg.signals[r.bind].(bottleneck)
	if !ok {
		return 0
	}
	if v := b.Capacity(); v > 0 && !math.IsInf(v, 0) {
		return v
	}
	return completed
}

// publish sets the rejection errors Admit hands out: their Retry-After
// (ra, for Sheddable) and whether they say no-retry. It reports whether
// no-retry changed.
func (c *Controller) publish(ra time.Duration, noRetry bool) (changed bool) {
	idx := raIndex(ra)
	if idx == c.retryIdx && noRetry == c.noRetry {
		return false
	}
	changed = noRetry != c.noRetry
	c.retryIdx, c.noRetry = idx, noRetry
	c.publishErrors()
	return changed
}

// Run calls Step every period with the real time and refreshes the coarse
// clock Admit reads every 10 ms, until ctx is done. Run one Run per
// Controller. Every interval is measured on the monotonic clock: a
// wall-clock step changes nothing.
//
// A saturated process runs timer goroutines late (behind the runnable
// handlers in Go's run queue, or behind other processes for a core): that
// is exactly when the controller must act. So while Run is active, one
// Admit in lateClockEvery also reads the clock, and when the last Step is
// more than lateSteps periods old that Admit samples the signals that can
// be sampled (a SampleAt(time.Time) method, as package pressure's have)
// and runs the Step itself: control follows the requests, not the timers.
// When Run is not active (never started, or ctx done), Admit reads the
// clock itself and steps the same way (see Admit).
func (c *Controller) Run(ctx context.Context) {
	step := time.NewTicker(c.cfg.period)
	defer step.Stop()
	tick := time.NewTicker(clockTick)
	defer tick.Stop()
	now := c.clk.now()
	c.clock.Store(now)
	c.running.Store(true)
	defer func() {
		c.running.Store(false)
		c.clock.Store(0)
	}()
	c.stepReal(now, false)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.clock.Store(c.clk.now())
		case <-step.C:
			now := c.clk.now()
			c.clock.Store(now)
			// A late step run by Admit may have just happened: a step
			// over a sliver of a period would read noise as rates.
			if now-c.stepped.Load() >= int64(c.cfg.period)/2 {
				c.stepReal(now, false)
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
	now := c.clk.now()
	c.clock.Store(now)
	if now-c.stepped.Load() < lateSteps*int64(c.cfg.period) || !c.stepping.CompareAndSwap(false, true) {
		return now
	}
	c.stepReal(now, true)
	c.stepping.Store(false)
	return now
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
	return c.tenants.tracker.Rate(key)
}

// need returns the number of requests the capacity needs running at once
// (the capacity estimate × the solo service time, solo.go) when requests
// are long enough for Go to time-slice them (longer than its 10 ms
// preemption slice), 0 otherwise. Shorter CPU-bound handlers run to
// completion once scheduled: Go's run queue already serves them one after
// the other, and a tighter bound would only move their wait into the run
// queue, where it can expire. Longer ones share the cores, and each of N
// admitted at once takes N times as long.
func (c *Controller) need() float64 {
	solo := c.solo.seconds()
	if solo < goSlice.Seconds() {
		return 0
	}
	return c.law.capEst * solo
}

// goSlice is the Go scheduler's preemption slice: a goroutine running
// longer is preempted so that others may run.
const goSlice = 10 * time.Millisecond

// stepRunQueue publishes the run queue's bound for the next period (or
// turns the queue off while the server is not busy), grants the slots a
// raised bound frees and expires the waits that are too long.
func (c *Controller) stepRunQueue(now int64, load float64, degraded, flood bool) {
	if c.cfg.runWait <= 0 {
		return
	}
	q := &c.runq
	if c.cfg.runBound > 0 {
		q.limit.Store(int64(c.cfg.runBound))
	} else {
		q.limit.Store(c.run.step(runIn{period: c.cfg.period, counting: q.on(),
			running: q.running.Load(), waiting: q.waiting.Load(), load: load,
			shedding: c.law.shedding, degraded: degraded, flood: flood,
			need: c.need()}))
	}
	lifo, wait := c.stand.step(c.cfg.runWait, c.bursting())
	cutoff := now - int64(wait)
	if c.dry.Load() {
		cutoff = math.MinInt64 // dry-run: a wait ends in a slot or with its caller (dryrun.go)
	}
	c.stand.oldest = q.expire(now, cutoff, lifo)
}
