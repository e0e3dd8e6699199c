package pressure

import (
	"github.com/levee-dev/levee/internal/smooth"
	"math"
	"math/bits"
	"time"
)

// The learning of Concurrency as a step function: concState.step takes
// one sample period's counts (a window) and moves the learned values, so
// that tests can drive it with hand-made windows.

// Learning rates, as time constants (see Concurrency for the rules).
const (
	serviceDown  = time.Second            // B towards a faster reading
	serviceUp    = 200 * time.Millisecond // B towards a slower one the shedding did not explain
	serviceDrift = 10 * time.Second       // B towards a slightly slower normal
	budgetTau    = 5 * time.Second        // the median budget, in log space
	budgetForget = time.Minute            // without budgets, forget the learned one
	peakForget   = 5 * time.Minute        // the most requests in service lately, towards fewer (notePeak)
)

// elasticityWaiting is the elasticity at and above which requests are
// taken to wait for each other: latency grows at least half as fast as
// concurrency.
const elasticityWaiting = 0.5

// queueWeight is the exponent of the queue's excess in the saturated
// reading (rate ÷ capacity × (queue ÷ allowed)^queueWeight): a queue 16
// times the allowed one asks for half the rate the bottleneck completes.
const queueWeight = 0.25

// burstKeep is the share of its completion rate at a burst's start below
// which a rising queue is no burst (see step).
const burstKeep = 0.8

// standingQueue is the waiting allowed while the controller does not shed:
// the queue-delay signal's target of 100 service times per core, counted
// in requests (a request behind Q others at c servers waits Q × B ÷ c),
// which a queue at 0.95 of its capacity stays below in nearly every
// interval (see QueueDelay).
const standingQueue = 100

// quietCap is how many young times (tol·f·B) one request may count for in
// the quiet latency the service time is learned from: a service that
// really slowed is followed in steps of this factor per evidence window.
const quietCap = 4

// growthSigmas is how many standard deviations of chance the growth in
// flight must exceed to be a queue building (growing), over the latest
// periods holding growthEvidence starts and ends (at most numFlowPeriods).
const (
	growthSigmas   = 3
	growthEvidence = 64
	numFlowPeriods = 40
)

// flowRing holds the starts and ends of the latest sample periods.
type flowRing struct {
	starts, ends [numFlowPeriods]int64
	head         int // index of the newest
}

func (r *flowRing) push(starts, ends int64) {
	r.head = (r.head + 1) % numFlowPeriods
	r.starts[r.head], r.ends[r.head] = starts, ends
}

// growing reports that the requests in flight grew by more than chance
// explains: starts − ends ≥ growthSigmas × √(starts + ends), and at least
// the minimum queue, over the latest periods that hold growthEvidence
// starts and ends (one at a thousand requests a second, 17 at forty). A
// queue that stands swings by about the square root of the requests that
// come and go (a gateway before a backend at 0.9 of its capacity: 20 in a
// period of 450); a dependency that slows tenfold under a steady load adds
// most of its arrivals (43 of 56 in the first 50 ms). Over one period at
// forty requests a second, chance alone passed the bar every few minutes.
//
// dispersion is how much more than chance the in-flight count swings by
// itself (see swing); 1 or less: chance alone.
func (r *flowRing) growing(cfg concConfig, dispersion float64) (grows bool, d, n float64) {
	var st, en int64
	for i := range numFlowPeriods {
		j := (r.head - i + numFlowPeriods) % numFlowPeriods
		st, en = st+r.starts[j], en+r.ends[j]
		if st+en >= growthEvidence {
			break
		}
	}
	d, n = float64(st-en), float64(st+en)
	k := math.Max(1, math.Min(dispersion, swingMaxDispersion))
	return d >= float64(cfg.minQueue) && d >= growthSigmas*math.Sqrt(k*n), d, n
}

// swing is how far the requests in flight swing by themselves while the
// controller does not shed: a dependency whose own handler times are
// heavy-tailed (a backend's requests that now and then miss a cache)
// keeps up on average, yet the calls waiting on it pile up and drain in
// bursts far beyond chance (8 backend cores of lognormal 1 ms requests
// with cv 3 at 0.9 of their capacity: a gateway's requests in flight
// swung from 5 to 300 within a period, 270 more starts than ends where
// chance explains 80), read as a queue growing and over the standing
// allowance; and once the gateway shed, its latency target read the
// backend's normal queue as waiting and kept the episode going. Learned
// as EWMAs over swingTau, from zero, from the sample periods in which the
// queue stands (the controller does not shed, the queue is not growing)
// and nothing is frozen:
//
//   - dispersion, the mean of (starts − ends)² ÷ (starts + ends) over the
//     growth test's window (1 for chance), which widens that test by its
//     square root, at most swingMaxDispersion (a fourfold bar);
//   - the queue's root mean square, three of which the allowed queue
//     never falls below — also while the controller sheds — and never
//     beyond what half the callers' budget allows.
//
// A queue that grows teaches nothing, so a dependency that slows is still
// seen growing and held to the latency target (and learning stops while
// the controller sheds); what the swings taught fades over swingTau.
type swing struct {
	dispersion float64 // mean of (starts − ends)² ÷ (starts + ends); 0 until learned (read as 1)
	queueMS    float64 // mean of queue², requests²; from 0
}

// Swing parameters (see swing).
const (
	swingTau           = 10 * time.Second
	swingMaxDispersion = 16
	swingSigmas        = 3
)

// learn moves the swing by one sample period (dt long) whose growth
// window held d more starts than ends of n, with queue requests waiting.
func (w *swing) learn(dt time.Duration, d, n, queue float64) {
	if n <= 0 {
		return
	}
	x := d * d / n
	if w.dispersion == 0 {
		w.dispersion = 1 // chance: what a Poisson flow shows
	}
	a := smooth.Alpha(dt, swingTau)
	w.dispersion += a * (x - w.dispersion)
	w.queueMS += a * (queue*queue - w.queueMS)
}

// allowance is the standing queue the swing asks for: swingSigmas root
// mean squares of the queue.
func (w *swing) allowance() float64 { return swingSigmas * math.Sqrt(w.queueMS) }

// maxCPUShare caps the CPU share in the contention allowance 1 ÷ (1 − CPU)
// at a factor of 20; at and above it the CPU is saturated and the signal
// reads 0 (the CPU signal is above its target).
const maxCPUShare = 0.95

// numBudgetBuckets log2 buckets of budgets in milliseconds: [0, 1ms),
// [1, 2ms), [2, 4ms) … up to 2^22 ms (70 minutes) and above.
const numBudgetBuckets = 24

func budgetBucket(d time.Duration) int {
	return min(bits.Len64(uint64(d/time.Millisecond)), numBudgetBuckets-1)
}

// budgetMid returns a bucket's geometric middle, in seconds.
func budgetMid(i int) float64 {
	if i == 0 {
		return 0.0005
	}
	return math.Ldexp(math.Sqrt2, i-1) / 1000
}

// numKBuckets buckets of the concurrency a request started with: one per
// value up to 8, then four per doubling up to 2^31.
const numKBuckets = 8 + 28*4

func kBucket(k int64) int {
	if k <= 8 {
		return int(max(k, 1) - 1)
	}
	k = min(k, 1<<31-1)
	e := bits.Len64(uint64(k)) - 1 // ≥ 3
	return 8 + (e-3)*4 + int(k>>(e-2)&3)
}

// window is one sample period as SampleAt takes it off the request path.
type window struct {
	dt       time.Duration
	inflight float64
	starts   int64
	// ended requests by kBucket of the concurrency they started with:
	// count, sum of concurrency, sum of in-handler ns, and that sum with
	// each request capped at quietCap (see quiet).
	n, k, ns, nsq [numKBuckets]int64
	budgets       [numBudgetBuckets]int64
	cpu           float64
	frozen        bool
	standing      bool // the controller says it does not shed (SetShedding)
}

// evidence accumulates windows until there are enough ended requests to
// tell waiting from a slower service.
type evidence struct {
	dur           time.Duration
	n, k, ns, nsq [numKBuckets]int64
	total         int64
}

func (e *evidence) add(w *window) {
	e.dur += w.dt
	for i := range e.n {
		e.n[i] += w.n[i]
		e.k[i] += w.k[i]
		e.ns[i] += w.ns[i]
		e.nsq[i] += w.nsq[i]
		e.total += w.n[i]
	}
}

func (e *evidence) count() int64 { return e.total }

// sums returns the count, concurrency and ns sums of buckets [from, to).
func (e *evidence) sums(from, to int) (n, k, ns int64) {
	for i := from; i < to; i++ {
		n, k, ns = n+e.n[i], k+e.k[i], ns+e.ns[i]
	}
	return n, k, ns
}

// complete reports whether the evidence is enough to learn from: 64 ended
// requests over at least 250 ms, 16 over 2 s, or whatever 10 s brought.
func (e *evidence) complete() bool {
	n := e.count()
	return n >= 64 && e.dur >= 250*time.Millisecond || n >= 16 && e.dur >= 2*time.Second || e.dur >= 10*time.Second
}

// latency returns the mean in-handler time in seconds.
func (e *evidence) latency() float64 {
	_, _, ns := e.sums(0, numKBuckets)
	return float64(ns) / 1e9 / float64(e.count())
}

// elasticity returns d log(latency) ÷ d log(concurrency) between the
// requests that started with more in flight and those that started with
// fewer (split at the median): ~0 when latency does not depend on
// concurrency, ~1 when it grows in proportion (a queue). It is 0 when
// every request ran alone, and NaN when the two groups are too small or
// too alike in concurrency to tell.
func (e *evidence) elasticity() float64 {
	n := e.count()
	if n > 0 && e.n[0] == n {
		return 0 // every request had the handler to itself
	}
	// The split: the first bucket by which half the requests are counted
	// ends the lower group, unless that leaves the upper one empty.
	m, cum := 0, int64(0)
	for ; m < numKBuckets; m++ {
		if cum += e.n[m]; 2*cum >= n {
			break
		}
	}
	if cum == n {
		m--
	}
	n0, k0, ns0 := e.sums(0, m+1)
	n1, k1, ns1 := e.sums(m+1, numKBuckets)
	side := max(2, n/10)
	if n0 < side || n1 < side || ns0 <= 0 || ns1 <= 0 {
		return math.NaN()
	}
	K0, K1 := float64(k0)/float64(n0), float64(k1)/float64(n1)
	if K1 < 1.15*K0 {
		return math.NaN()
	}
	r0, r1 := float64(ns0)/float64(n0), float64(ns1)/float64(n1)
	return math.Log(r1/r0) / math.Log(K1/K0)
}

// quiet returns the mean in-handler time, in seconds, and the mean
// concurrency at start of the requests that started with the fewest others
// in flight: the lowest buckets holding at least a quarter of the
// requests. They waited least. Each request counts at most quietCap
// young times (see quietCapAt): a handful that waited on something other
// than the service — a downstream pushback's retry-after, a lock held by a
// stuck request — would carry the mean alone (ten requests held 0.9 s
// among 944 of 1.1 ms made it 9.3 ms, and the service time was learned
// eightfold in one window).
func (e *evidence) quiet() (latency, k float64) {
	n := e.count()
	var cn, ck, cns int64
	for i := range e.n {
		cn, ck, cns = cn+e.n[i], ck+e.k[i], cns+e.nsq[i]
		if 4*cn >= n {
			break
		}
	}
	cn = max(cn, 1)
	return float64(cns) / 1e9 / float64(cn), float64(ck) / float64(cn)
}

// numStartPeriods sample periods of start counts are kept to count the
// requests started within the last f·B: 128 default periods, 6.4 s.
const numStartPeriods = 128

// startRing holds the start counts of the latest sample periods.
type startRing struct {
	dt   [numStartPeriods]time.Duration
	n    [numStartPeriods]int64
	head int // index of the newest
	span time.Duration
	sum  int64
}

func (r *startRing) push(dt time.Duration, n int64) {
	r.head = (r.head + 1) % numStartPeriods
	r.span += dt - r.dt[r.head]
	r.sum += n - r.n[r.head]
	r.dt[r.head], r.n[r.head] = dt, n
}

// within returns the requests started within the last d, counting a part
// of a period in proportion and, beyond the periods kept, at their mean
// rate.
func (r *startRing) within(d time.Duration) float64 {
	var got float64
	for i, j := 0, r.head; i < numStartPeriods && d > 0 && r.dt[j] > 0; i, j = i+1, (j+numStartPeriods-1)%numStartPeriods {
		if d < r.dt[j] {
			return got + float64(r.n[j])*float64(d)/float64(r.dt[j])
		}
		got += float64(r.n[j])
		d -= r.dt[j]
	}
	if d > 0 && r.span > 0 {
		got += float64(r.sum) * float64(d) / float64(r.span)
	}
	return got
}

// concState is what a Concurrency has learned.
type concState struct {
	lastAt time.Time
	avg    smooth.EWMA // of the value
	rate   smooth.EWMA // ended requests per second
	arrive smooth.EWMA // started requests per second
	starts startRing
	flow   flowRing // starts and ends, for growing
	swing  swing    // how far in-flight swings by itself
	ev     evidence

	service    float64       // no-wait service time B, seconds; 0 = not learned yet
	throughput float64       // ended requests per second in the latest evidence
	peak       float64       // the most requests in service the completions explained lately, B·X (notePeak)
	sinceEmpty time.Duration // since a sample found the handler empty
	elasticity float64
	latency    float64 // seconds, of the latest complete evidence
	waiting    bool

	budgetAcc   [numBudgetBuckets]int64
	budgetN     int64
	budgetDur   time.Duration
	budgetQuiet time.Duration // time since the last budget seen
	budget      float64       // learned median budget, seconds; 0 = unknown

	target                           float64 // latency target T, seconds
	inflight, served, queue, allowed float64
	capacityNow                      float64 // while waiting, per second; else 0
	valueNow                         float64
	lastCPU                          float64
	lastFroze                        bool
	standing                         bool    // the standing queue was allowed
	burst                            burst   // a rising queue's allowance (burst.go)
	burstRate                        float64 // ended requests per second when the burst began
	burstEnded                       float64 // requests ended since
}

// tolerance is how much longer than f·B a request may take before it
// counts as waiting: halfway to the latency target's ratio.
func tolerance(cfg concConfig) float64 { return 1 + (cfg.ratio-1)/2 }

// restartServiceTimes is how many service times (tol·f·B) after the
// handler was last empty its young requests are known not to queue.
const restartServiceTimes = 4

// contention returns the latency factor CPU sharing explains at CPU share u.
func contention(u float64) float64 {
	return 1 / (1 - math.Min(math.Max(u, 0), maxCPUShare))
}

// step moves the state by one window.
func (s *concState) step(w *window, cfg concConfig) {
	s.lastCPU, s.lastFroze = w.cpu, w.frozen
	var ended int64
	for _, n := range w.n {
		ended += n
	}
	before := s.rate.Value() // the completion rate up to this window; NaN at first
	X := s.rate.Update(float64(ended)/w.dt.Seconds(), w.dt)
	s.sinceEmpty += w.dt
	if w.inflight < 1 {
		s.sinceEmpty = 0
	}
	lambda := s.arrive.Update(float64(w.starts)/w.dt.Seconds(), w.dt)
	s.starts.push(w.dt, w.starts)
	s.ev.add(w)
	if s.ev.complete() {
		if s.ev.count() >= 4 {
			s.learn(cfg, w.cpu, w.frozen)
		}
		s.ev = evidence{}
	}
	s.learnBudget(w)
	s.target = s.latencyTarget(cfg)
	if s.service == 0 {
		return // no value before the service time is known
	}
	f := contention(w.cpu)
	s.inflight = w.inflight
	capacity := math.Max(X, s.throughput)
	s.capacityNow = 0
	// done is how many requests the completions explain in service;
	// young how long a request takes at most without waiting, and
	// allYoung that no request in flight has been in the handler longer.
	done := f * s.service * X
	s.notePeak(s.service*X, w)
	young := tolerance(cfg) * f * s.service
	allYoung := s.inflight-s.starts.within(seconds(young)) < 1
	if s.waiting {
		s.capacityNow = capacity
		// Requests wait for the bottleneck, which serves as many as its
		// throughput × the service time at once. The throughput is the
		// larger of the evidence window's and the last few periods': the
		// evidence may include periods in which shedding left the
		// bottleneck idle.
		s.served = math.Min(s.inflight, f*s.service*capacity)
	} else {
		// Nobody waits: every request started within f·B is in service
		// (a traffic step adds them as they come), and not fewer than the
		// completions explain (after shedding cuts the starts, the
		// requests already in flight are still being served). But not
		// more than ratio times what the completions explain: a flood far
		// above what the handler completes is waiting, well before its
		// requests outlast f·B. While no request in flight has outlasted
		// tol·f·B, they explain the most they did lately (peak), not what
		// they do now: traffic that comes back after a dip (an
		// upstream outage, another gate refusing most requests, this
		// signal's own shedding) is no flood, though for a service time
		// only the dip's requests complete — read against the current
		// rate it looked like one, a controller cut, the completions
		// stayed low, and the misreading fed itself for seconds. A
		// dependency that slows keeps its requests past tol·f·B, and the
		// current completions speak again.
		explained := done
		if allYoung {
			explained = math.Max(done, f*s.peak)
		}
		s.served = math.Min(s.inflight, math.Min(math.Max(s.starts.within(seconds(f*s.service)), done), cfg.ratio*explained))
	}
	s.queue = math.Max(0, s.inflight-s.served)
	if allYoung && s.sinceEmpty.Seconds() <= restartServiceTimes*young {
		// The handler was empty a few service times ago — an upstream
		// silence, or admission shedding everything — and no request has
		// been in it longer than one takes: nobody waits behind anyone,
		// whatever the completions say. After a silence nothing completes
		// for a service time; long requests read as a queue would keep a
		// controller cutting, fewer would complete, and the server could
		// stay shut long after its overload. A bottleneck's queue still
		// shows as soon as its oldest requests outlast tol·f·B.
		s.queue = 0
	}
	s.flow.push(w.starts, ended)
	grows, gd, gn := s.flow.growing(cfg, s.swing.dispersion)
	s.standing = w.standing && !grows
	s.allowed = s.allowedQueue(cfg, s.standing)
	if s.standing && !w.frozen {
		s.swing.learn(w.dt, gd, gn, s.queue) // after its own reading: a burst does not excuse itself
	}
	// A burst (see burst): a queue that rises while the controller does
	// not shed may wait up to half the callers' budget, counted at the
	// rate requests complete now, for the burst allowance — while they
	// complete at least burstKeep of the rate they did when it began. A
	// burst is more demand; a dependency that slows is less capacity:
	// its completions fall, and its queue is held to the latency target
	// at once (without this test 5.3–5.8 % of TestPoolDependency's runs
	// ended late, none with it).
	level := 0.0
	if s.budget > 0 {
		level = math.Min(s.mostQueue(cfg), X*s.waitCeiling(cfg))
	}
	normal, was := s.allowed, s.burst.active()
	s.allowed = s.burst.step(w.dt, s.queue, normal, level, burstAllowance(seconds(s.budget)), !w.standing)
	if s.burst.active() {
		if !was {
			s.burstRate, s.burstEnded = before, 0
		}
		// The spell's own count of completions, against burstKeep of
		// what the rate before it completes in as long, less three
		// Poisson deviations: the smoothed rate falls too late (judged
		// by it, 1.4–1.9 % of the pool's runs ended late).
		s.burstEnded += float64(ended)
		due := burstKeep * s.burstRate * s.burst.age.Seconds()
		if !(s.burstEnded >= due-3*math.Sqrt(due)) {
			s.burst.spent, s.allowed = true, normal
		}
	}
	raw := s.queue / s.allowed
	if s.waiting && capacity > 0 && !s.standing && !s.burst.active() {
		// The bottleneck is saturated: read the rate let in against what
		// it completes, weighted by how far the queue is from the allowed
		// one. Admitting less shows at once (a queue drains only at the
		// bottleneck's pace: read as a queue alone, the value would stay
		// high for the whole drain and have the controller cut for all of
		// it), and the queue settles where the target puts it. Not while
		// a queue stands (it is not growing): there the rate let in ÷ the
		// rate completed is chance, and at tens of requests a second a
		// handful arriving together read as twice the capacity.
		raw = lambda / capacity * math.Pow(s.queue/s.allowed, queueWeight)
	}
	if w.cpu >= maxCPUShare {
		// A saturated CPU explains any wait in the handler; the CPU signal
		// speaks for it, and counting it twice would cut twice as deep.
		raw = 0
	}
	s.valueNow = s.avg.Update(raw, w.dt)
}

// quietCapAt returns the cap, in ns, on one request's contribution to the
// quiet latency; 0 (none) until B is known.
func (s *concState) quietCapAt(cfg concConfig) int64 {
	if s.service == 0 {
		return 0
	}
	return int64(quietCap * tolerance(cfg) * contention(s.lastCPU) * s.service * 1e9)
}

// allowedQueue returns the requests that may wait: the latency target's
// share, (T ÷ B − 1) × served, at least the configured minimum and the
// learned swing; while the queue stands (the controller does not shed,
// the queue is not growing), at least standingQueue; the swing and the
// standing level no more than keeps a request within half its caller's
// budget (the latency target's ceiling without the 1.5 × B floor: see
// Concurrency).
func (s *concState) allowedQueue(cfg concConfig, standing bool) float64 {
	allowed := math.Max(float64(cfg.minQueue), (s.target/s.service-1)*s.served)
	most := s.mostQueue(cfg)
	if !standing {
		return math.Max(allowed, math.Min(s.swing.allowance(), most))
	}
	return math.Max(allowed, math.Min(math.Max(standingQueue, s.swing.allowance()), most))
}

// mostQueue returns the most requests that may wait: as many as keep a
// request within half its caller's budget (the latency target's ceiling
// without the 1.5 × B floor: see Concurrency).
func (s *concState) mostQueue(cfg concConfig) float64 {
	return (s.waitCeiling(cfg)/s.service - 1) * s.served
}

// waitCeiling returns the longest a request may spend in the handler:
// the latency target's ceiling, lowered to half the callers' median
// budget when one is known (the wait that leaves a request half its
// time: the burst level, burst.go).
func (s *concState) waitCeiling(cfg concConfig) float64 {
	hi := cfg.ceilT.Seconds()
	if s.budget > 0 {
		hi = math.Min(hi, s.budget/2)
	}
	return hi
}

// notePeak keeps the most requests in service the completions explained
// lately (B·X; the CPU contention f is applied when it is used, so that a
// CPU spike does not inflate it): a count, not a rate, so that a
// dependency that slows does not inflate it either (its completions fall
// as its service time rises). It is forgotten over minutes (peakForget),
// never while another signal says the process is overloaded. A peak set
// high (a burst of slow requests) only delays the early reading of a
// flood until its requests outlast tol·f·B.
func (s *concState) notePeak(done float64, w *window) {
	if done >= s.peak {
		s.peak = done
	} else if !w.frozen {
		s.peak += smooth.Alpha(w.dt, peakForget) * (done - s.peak)
	}
}

// learn updates the service time, the throughput and the waiting verdict
// from one complete evidence window.
func (s *concState) learn(cfg concConfig, cpu float64, frozen bool) {
	ev := &s.ev
	R := ev.latency()
	e := ev.elasticity()
	s.latency, s.elasticity = R, e
	s.throughput = float64(ev.count()) / ev.dur.Seconds()
	f := contention(cpu)
	tol := tolerance(cfg)
	q, kq := ev.quiet()
	switch {
	case s.service == 0:
		s.service = q
	case q < s.service:
		s.service += smooth.Alpha(ev.dur, serviceDown) * (q - s.service)
	case !frozen && (e < elasticityWaiting || kq <= 2):
		// Slower, and not because requests wait for each other (latency
		// does not grow with concurrency, or the requests that waited
		// least had at most one other in flight): the service itself is
		// slower. Follow it quickly when the difference is large (shedding
		// cannot help), slowly when it is within the tolerance.
		tau := serviceDrift
		if q > tol*s.service*f {
			tau = serviceUp
		}
		s.service += smooth.Alpha(ev.dur, tau) * (q - s.service)
	}
	s.waiting = R > tol*s.service*f && !(e < elasticityWaiting)
}

// learnBudget accumulates the callers' budgets and updates their median
// once there are enough of them.
func (s *concState) learnBudget(w *window) {
	var n int64
	for i, c := range w.budgets {
		s.budgetAcc[i] += c
		n += c
	}
	s.budgetN += n
	s.budgetDur += w.dt
	if n > 0 {
		s.budgetQuiet = 0
	} else if s.budgetQuiet += w.dt; s.budgetQuiet >= budgetForget {
		s.budget = 0
	}
	if s.budgetN < 16 && (s.budgetN == 0 || s.budgetDur < 10*time.Second) {
		return
	}
	if s.budgetN > 0 {
		half, cum, mid := (s.budgetN+1)/2, int64(0), 0.0
		for i, c := range s.budgetAcc {
			if cum += c; cum >= half {
				mid = budgetMid(i)
				break
			}
		}
		switch {
		case s.budget == 0:
			s.budget = mid
		case w.frozen && mid > s.budget:
			// Overloaded: not learned upwards (the budgets a standing
			// queue leaves are shorter, which only tightens the targets).
		default:
			s.budget = math.Exp(math.Log(s.budget) + smooth.Alpha(s.budgetDur, budgetTau)*(math.Log(mid)-math.Log(s.budget)))
		}
	}
	s.budgetAcc, s.budgetN, s.budgetDur = [numBudgetBuckets]int64{}, 0, 0
}

// latencyTarget returns T = clamp(ratio × B, floor, ceiling), the ceiling
// lowered to half the callers' median budget but not below 1.5 × B (see
// Concurrency).
func (s *concState) latencyTarget(cfg concConfig) float64 {
	if s.service == 0 {
		return 0
	}
	tol := 1 + (cfg.ratio-1)/2
	hi := math.Max(s.waitCeiling(cfg), tol*s.service)
	return math.Max(math.Min(cfg.ratio*s.service, hi), cfg.floorT.Seconds())
}

func (s *concState) readingAt(now time.Time) ConcurrencyReading {
	return ConcurrencyReading{
		Time: now, Value: s.valueNow,
		InFlight: s.inflight, Served: s.served, Queue: s.queue, Allowed: s.allowed, Burst: s.burst.active(),
		Throughput: s.throughput,
		Latency:    seconds(s.latency), ServiceTime: seconds(s.service), LatencyTarget: seconds(s.target),
		Budget: seconds(s.budget), Elasticity: s.elasticity, Waiting: s.waiting,
		CPU: s.lastCPU, Frozen: s.lastFroze, Standing: s.standing,
	}
}

func seconds(x float64) time.Duration { return time.Duration(x * 1e9) }
