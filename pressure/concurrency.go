package pressure

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/smooth"
)

// Concurrency sees requests waiting inside the handler: on a dependency's
// connection pool, a lock, a slow downstream service — waits that leave the
// CPU low. It implements levee.Signal with Name "concurrency" and Target 1;
// Value is the number of requests waiting in the handler ÷ the number the
// latency target allows to wait:
//
//	served  = requests started within the last f·B (Little's law: those a
//	          no-wait service time B, stretched by CPU contention f, explains);
//	          while requests wait for each other, the throughput × f·B
//	          (the bottleneck serves that many at once), at most in flight
//	queue   = in flight − served, at least 0
//	allowed = max(min queue, (T ÷ B − 1) × served, the queue's learned
//	          swing); while the admission controller says it is not
//	          shedding (SetShedding) and the queue is not growing, at least
//	          standingQueue; never beyond what half the callers' budget
//	          allows
//	Value   = queue ÷ allowed, smoothed (WithConcurrencySmoothing)
//
// It reads about 0 while nothing waits, whatever the load, and 1 when the
// in-handler latency reaches the target T. A traffic step does not move it
// (new requests are counted as served), a dependency that stops answering
// does at once (requests older than f·B pile up). A flood of more than
// ratio times the requests the completions explain reads as waiting before
// its requests outlast f·B; while no request in flight is older than a
// service time, "the completions" are the most they explained lately, so
// that traffic coming back after a dip — an upstream outage, another gate
// refusing most requests — is not read as a flood.
//
// # What it learns
//
// From every request that ends it takes the in-handler time (without the
// time the caller held it up: see DoneAt) and the number of requests that
// were in the handler when it started, and learns:
//
//   - the no-wait service time B: what a request takes when it waits for
//     nobody. It falls at once towards faster readings; it rises only when
//     latency does not depend on concurrency (requests that started with
//     many others in flight were no slower than those that started with
//     few: the service itself got slower, as a dependency that slows from
//     5 ms to 50 ms does, and shedding cannot help), and never while the
//     freeze function (WithConcurrencyFreeze; in Default: another signal of
//     the set above its target) says the process is overloaded, so that
//     overloaded latency never becomes the new normal. After shedding has
//     drained the queue, the requests that are left wait for nobody: their
//     latency is the new B, and the signal lets the load back in — there is
//     no limit that ratchets down and stays there. One request counts for
//     at most 4 × tol·f·B in it (a handful held by a downstream's
//     Retry-After must not carry the mean), so a service that really
//     slowed is followed by that factor per evidence window;
//   - whether requests wait for each other (latency grows with concurrency
//     beyond 1 + (ratio − 1)/2 times f·B), which caps served at the
//     throughput the handler's bottleneck achieves;
//   - how variable the handler time is (Variability: its squared
//     coefficient of variation, over about 5 s, not while the process is
//     overloaded or sheds), by which the queue-delay signal scales its
//     target: a queue before handlers whose times vary more than
//     exponentially waits longer at the same load (see spread.go);
//   - the latency target T = clamp(ratio × B, floor, ceiling): ratio
//     (WithLatencyRatio) defaults to 2; floor and ceiling (WithLatencyBounds)
//     default to 1 ms and 10 s; the ceiling is lowered to half the median
//     time budget callers give their requests (StartAt's budget), but never
//     below 1.5 × B.
//
// # A queue that stands, and one that grows
//
// A dependency that keeps up with its load still queues: a backend of one
// core at 0.9 of its capacity answers in ten of its service times on
// average, one of eight cores in two, and a caller's in-flight count
// swings with that backend's queue (in the simulator's avalanche, the
// front tier before a backend of eight cores at 0.9 held 5 requests on
// average and 25–29 at times). Read against T = 2 × B, that is "waiting":
// a gateway shed work its backend was serving, turned it into retries and
// several times the latency, and before backends of one core of 20 ms
// requests or four of 100 ms it served 0.9 of what an unprotected one
// served at 0.9 and 0.95 of capacity. A controller that reports its state
// (SetShedding: admit's does, every period) makes the signal tell the two
// apart the way the queue-delay signal does: while it is not shedding, the
// waiting allowed is at least standingQueue (100) requests — the
// queue-delay signal's target of 100 service times per core is 100
// requests queued at any parallelism, which one server at 0.95 of its
// capacity exceeds 0.6 % of the time (0.95^101), more servers less — but
// never more than lets a request finish within half its caller's budget;
// once it sheds, the target T holds the queue short again. A dependency
// that cannot keep up (a pool that slows tenfold) is still seen in the
// first period: its requests in flight grow by more than three standard
// deviations of chance (starts − ends against √(starts + ends)), and a
// growing queue is held to T whatever the controller says. Without
// SetShedding the signal always holds T.
//
// A dependency whose own handler times are heavy-tailed keeps up on
// average and still swings its callers' in-flight count far beyond
// chance: before eight backend cores of lognormal 1 ms requests (cv 3) at
// 0.9, a gateway's requests in flight went from 5 to 300 within a period.
// Read as growth and as a queue over the standing level, that started
// episodes; held to T once shedding, the backend's normal queue kept them
// going (the simulated gateway served 0.96–0.98 of what the unprotected
// pair served at 0.9–0.95). So the signal learns, slowly (10 s) and only
// from queues that stand while the controller does not shed, how far the
// queue swings — three times its root mean square, which also counts
// while shedding — and how far beyond chance starts − ends wanders, which
// widens the growth test by up to four times (see swing). A queue that
// grows, or one seen while shedding, teaches nothing, and what was learned
// fades: a slowing dependency is still held to T (TestPoolDependency's
// pool: caught in its first periods, p99 443–487 ms, as before).
//
// A burst of demand grows the queue too, and a dependency that keeps up
// with it serves it in time. The signal applies the queue-delay signal's
// burst rule (see QueueDelay, burst.go): a queue that rises above half
// the waiting allowed while the controller does not shed may grow to as
// many requests as the current completion rate drains within half the
// callers' median budget, for the burst allowance and a slope back as
// long — while the requests
// ended since it began reach burstKeep (0.8) of what the completion rate
// before it ends in as long, less three Poisson deviations. A burst is
// more demand; a dependency that slows is less capacity, and its falling
// completions end the allowance within a period or two
// (TestPoolDependency: as before).
//
// Latency that CPU contention explains is not waiting for a dependency:
// handlers that share a busy CPU take about f = 1 ÷ (1 − CPU share)
// longer. With WithConcurrencyCPU (Default passes its CPU signal) the
// signal allows for that, so a CPU-bound server, whose queue forms before
// the handler and whose CPU signal trips, does not trip this one too.
//
// # Request path
//
// StartAt when the handler starts (after any admission run queue), DoneAt
// when it returns, Drop for a request that leaves without a meaningful
// duration (a hijacked connection, a stream), Suspend and Resume around
// time the request spends waiting on its caller. All are lock-free, do not
// allocate and make no system call: one to four atomic additions each.
// A request that waits between a client call's attempts (a backoff, a
// downstream's Retry-After) is paused (levee.Pauser, kept with Pauses):
// out of the count while it sleeps, the sleep left out of its time.
//
// SampleAt (Run calls it every period, default 50 ms) does the learning
// under a mutex, off the request path. Value is NaN until the first
// requests have ended (B is known). Safe for concurrent use.
type Concurrency struct {
	inflight atomic.Int64
	_        [56]byte
	starts   atomic.Int64
	_        [56]byte
	// ended requests by the concurrency they started with (kBucket).
	ended [numKBuckets]endBucket
	_     [56]byte
	// budgets of starting requests, by budgetBucket.
	budgets [numBudgetBuckets]atomic.Int64

	cfg      concConfig
	value    atomicFloat
	capacity atomicFloat
	budget   atomic.Int64 // learned median budget, ns; 0 = unknown
	served   atomic.Int64 // requests ended (DoneAt) up to the last sample
	quietCap atomic.Int64 // cap on one request's quiet-latency ns; 0 = none
	told     atomic.Bool  // SetShedding was called
	shedding atomic.Bool  // and said the controller sheds
	spread   spread       // the handler time's variability (Variability)

	mu      sync.Mutex
	st      concState
	reading ConcurrencyReading
}

type endBucket struct {
	n, k, ns, nsq atomic.Int64
	sq            atomicFloat // Σ (in-handler seconds)², for the spread
}

var _ levee.Signal = (*Concurrency)(nil)

type concConfig struct {
	period   time.Duration
	tau      time.Duration
	ratio    float64
	minQueue int
	floorT   time.Duration
	ceilT    time.Duration
	cpu      func() float64
	freeze   func() bool
}

// ConcurrencyOption configures a Concurrency.
type ConcurrencyOption func(*concConfig, *checker)

// WithConcurrencyPeriod sets how often Run samples. Default 50ms; range
// [10ms, 1m]; 0 means the default.
func WithConcurrencyPeriod(d time.Duration) ConcurrencyOption {
	return func(c *concConfig, ch *checker) { ch.period("WithConcurrencyPeriod", d, &c.period) }
}

// WithConcurrencySmoothing sets the EWMA time constant of the value.
// Default 100ms; 0 disables smoothing; range [0, 1m].
func WithConcurrencySmoothing(d time.Duration) ConcurrencyOption {
	return func(c *concConfig, ch *checker) { ch.smoothing("WithConcurrencySmoothing", d, &c.tau) }
}

// WithLatencyRatio sets the in-handler latency, as a multiple of the
// learned no-wait service time, at which the signal reads its target.
// Default 2 (requests may wait as long again as they are served); range
// [1.2, 100]; 0 means the default.
func WithLatencyRatio(r float64) ConcurrencyOption {
	return func(c *concConfig, ch *checker) {
		set(ch, &c.ratio, r, r >= 1.2 && r <= 100, "WithLatencyRatio", "must be in [1.2, 100] (0 means the default, 2)")
	}
}

// WithLatencyBounds sets the floor and the ceiling of the latency target.
// Default 1ms and 10s; range 0 < floor ≤ ceiling ≤ 1h; a 0 means that
// bound's default. The ceiling is lowered further to half the median
// budget callers send (see StartAt), but never below 1.5 × the learned
// service time.
func WithLatencyBounds(floor, ceiling time.Duration) ConcurrencyOption {
	return func(c *concConfig, ch *checker) {
		f, h := c.floorT, c.ceilT
		if floor != 0 {
			f = floor
		}
		if ceiling != 0 {
			h = ceiling
		}
		ch.check(f > 0 && h >= f && h <= time.Hour, "WithLatencyBounds",
			"want 0 < floor ≤ ceiling ≤ 1h (0 means the default, 1ms and 10s)", floor, ceiling)
		c.floorT, c.ceilT = f, h
	}
}

// WithMinQueue sets the smallest number of waiting requests the signal
// reads as its target: a handful of requests waiting is never worth
// shedding for, however slow the traffic. Default 4; range [1, 1e6]; 0
// means the default.
func WithMinQueue(n int) ConcurrencyOption {
	return func(c *concConfig, ch *checker) {
		set(ch, &c.minQueue, n, n >= 1 && n <= 1e6, "WithMinQueue", "must be in [1, 1e6] (0 means the default, 4)")
	}
}

// WithConcurrencyCPU sets the function returning the process's CPU
// utilisation (a fraction of the cores it may use, as CPU.Value), with
// which latency explained by CPU contention is discounted (see
// Concurrency). Default: none (no discount). Default passes its CPU
// signal. NaN readings count as 0; nil restores the default.
func WithConcurrencyCPU(f func() float64) ConcurrencyOption {
	return func(c *concConfig, _ *checker) {
		if f != nil {
			c.cpu = f
		}
	}
}

// WithConcurrencyFreeze sets the function that says the process is
// overloaded: while it returns true the service time and the callers'
// budget are not learned upwards. Default: never. Default passes "another
// signal of the set reads above its target". nil restores the default.
func WithConcurrencyFreeze(f func() bool) ConcurrencyOption {
	return func(c *concConfig, _ *checker) {
		if f != nil {
			c.freeze = f
		}
	}
}

// NewConcurrency returns a concurrency signal. It panics with a
// "pressure: ..." message on an out-of-range option, a programming error
// (as time.NewTicker does for a non-positive period).
func NewConcurrency(opts ...ConcurrencyOption) *Concurrency {
	cfg := concConfig{
		period: setPeriod, tau: 100 * time.Millisecond, ratio: 2, minQueue: 4,
		floorT: time.Millisecond, ceilT: 10 * time.Second,
		cpu:    func() float64 { return 0 },
		freeze: func() bool { return false },
	}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	c := &Concurrency{cfg: cfg}
	c.value.store(math.NaN())
	c.st = concState{avg: smooth.EWMA{Tau: cfg.tau}, rate: smooth.EWMA{Tau: 200 * time.Millisecond}, arrive: smooth.EWMA{Tau: cfg.tau},
		elasticity: math.NaN(), valueNow: math.NaN()}
	c.reading = c.st.readingAt(time.Time{})
	return c
}

// Name returns "concurrency".
func (c *Concurrency) Name() string { return "concurrency" }

// Value returns the smoothed waiting requests ÷ the waiting allowed, NaN
// until the service time is known.
func (c *Concurrency) Value() float64 { return c.value.load() }

// Target returns 1: as many requests wait as the latency target allows.
func (c *Concurrency) Target() float64 { return 1 }

// Period returns Run's sampling period.
func (c *Concurrency) Period() time.Duration { return c.cfg.period }

// InFlight returns the number of requests in the handler now.
func (c *Concurrency) InFlight() int { return int(max(0, c.inflight.Load())) }

// Capacity returns the requests per second the handler's bottleneck
// completes, measured while requests wait for each other (the latest such
// sample), or 0 while nothing waits. A controller steering an admitted
// rate can take it as the capacity when this signal is the one above its
// target: admitted ÷ Value is no capacity estimate for a wait.
func (c *Concurrency) Capacity() float64 { return c.capacity.load() }

// Budget returns the median time budget of the requests that started
// recently (see StartAt), learned downwards also while the process is
// overloaded (a queue that eats the callers' time shortens the budgets
// their requests start with, and the targets it caps tighten with it) and
// upwards only while it is not; 0 when too few requests carried one.
func (c *Concurrency) Budget() time.Duration { return time.Duration(c.budget.Load()) }

// Served returns how many requests have ended (DoneAt) up to the last
// sample: the requests the process served, for the queue-delay signal's
// scale (WithQueueServed).
func (c *Concurrency) Served() int64 { return c.served.Load() }

// Start is a request in the handler, returned by StartAt and given back to
// DoneAt or Drop. The zero Start is not counted: DoneAt and Drop ignore it.
type Start struct {
	at time.Time
	k  int64 // requests in flight when it started, itself included
}

// maxSample bounds one request's in-handler time: a request that was not
// excluded although it lived for minutes (a forgotten long-poll) must not
// carry the mean alone.
const maxSample = time.Minute

// StartAt records that a request's handler started at now. budget is the
// time left before the request's deadline (0 or less: none); the median
// budget caps the latency and queue-delay targets, so that waits the
// callers cannot afford are never normal. Pass it only for requests whose
// deadline the server believes (levee's adapters pass the deadline they
// enforce). Lock-free, no allocation.
func (c *Concurrency) StartAt(now time.Time, budget time.Duration) Start {
	k := c.inflight.Add(1)
	c.starts.Add(1)
	if budget > 0 {
		c.budgets[budgetBucket(budget)].Add(1)
	}
	return Start{at: now, k: max(k, 1)}
}

// DoneAt records that the request s ended at now. excluded is the part of
// its time spent waiting on its caller rather than on the server (reading
// a slowly sent body, writing to a slow reader): it is not service time.
// Lock-free, no allocation.
func (c *Concurrency) DoneAt(s Start, now time.Time, excluded time.Duration) {
	if s.k == 0 {
		return
	}
	c.inflight.Add(-1)
	d := now.Sub(s.at) - max(excluded, 0)
	if d < 0 {
		return // a clock that went backwards says nothing about the service
	}
	b := &c.ended[kBucket(s.k)]
	b.n.Add(1)
	b.k.Add(s.k)
	d = min(d, maxSample)
	b.ns.Add(int64(d))
	b.sq.add(d.Seconds() * d.Seconds())
	if q := time.Duration(c.quietCap.Load()); q > 0 {
		d = min(d, q)
	}
	b.nsq.Add(int64(d))
}

// Drop records that the request s left the handler without a duration
// that says anything about the service: its connection was hijacked, it
// became a stream or a long-poll. Lock-free, no allocation.
func (c *Concurrency) Drop(s Start) {
	if s.k != 0 {
		c.inflight.Add(-1)
	}
}

// Suspend takes a started request out of the in-flight count while it
// waits on its caller (a body read); Resume puts it back. Calls must pair
// up and happen between StartAt and DoneAt. Lock-free, no allocation.
func (c *Concurrency) Suspend() { c.inflight.Add(-1) }

// Resume ends a Suspend.
func (c *Concurrency) Resume() { c.inflight.Add(1) }

// ConcurrencyReading is the detail of the latest sample.
type ConcurrencyReading struct {
	Time time.Time
	// Value is what Value returns.
	Value float64
	// InFlight, Served, Queue and Allowed are the requests in the handler,
	// those the service time explains, the rest (waiting) and the waiting
	// the target allows, at the sample (see Concurrency).
	InFlight, Served, Queue, Allowed float64
	// Throughput is the rate of ended requests in the latest evidence
	// window, per second.
	Throughput float64
	// Latency is the mean in-handler time of the latest evidence window;
	// ServiceTime the learned no-wait service time B; LatencyTarget T.
	Latency, ServiceTime, LatencyTarget time.Duration
	// Budget is the learned median caller budget, 0 when unknown.
	Budget time.Duration
	// Elasticity says how latency grew with concurrency in the latest
	// evidence window: ~0 not at all (the service time itself), ~1 in
	// proportion (requests wait for each other); NaN without enough
	// spread in concurrency to tell.
	Elasticity float64
	// Waiting reports that the latest evidence window showed requests
	// waiting for each other beyond what CPU contention explains.
	Waiting bool
	// CPU is the CPU utilisation used for the contention allowance.
	CPU float64
	// Frozen reports that learning upwards was suspended by the freeze
	// function at the latest sample.
	Frozen bool
	// Burst reports that Allowed is the burst level or on its slope back:
	// the queue rose while the controller did not shed, and the
	// completions kept pace (see "A queue that stands, and one that
	// grows").
	Burst bool
	// Standing reports that the controller said it does not shed and the
	// requests in flight were not growing, so that the waiting allowed
	// was at least the standing queue (see Concurrency).
	Standing bool
}

// Reading returns the detail of the latest sample.
func (c *Concurrency) Reading() ConcurrencyReading {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reading
}

// SampleAt closes a sample period at now: it takes the period's starts,
// ends and budgets off the request path, updates what the signal has
// learned (see Concurrency) and recomputes the value. A
// sample less than half a period after the previous one is skipped (the
// next one covers its time).
func (c *Concurrency) SampleAt(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := &c.st
	dt, ok := advance(&st.lastAt, now, c.cfg.period)
	if !ok {
		return
	}

	var w window
	w.dt = dt
	w.inflight = float64(max(0, c.inflight.Load()))
	w.starts = c.starts.Swap(0)
	var ended, ns int64
	var sq float64
	for i := range c.ended {
		w.n[i] = c.ended[i].n.Swap(0)
		ended += w.n[i]
		w.k[i] = c.ended[i].k.Swap(0)
		w.ns[i] = c.ended[i].ns.Swap(0)
		ns += w.ns[i]
		w.nsq[i] = c.ended[i].nsq.Swap(0)
		sq += c.ended[i].sq.swap(0)
	}
	for i := range c.budgets {
		w.budgets[i] = c.budgets[i].Swap(0)
	}
	w.cpu = c.cfg.cpu()
	if math.IsNaN(w.cpu) {
		w.cpu = 0
	}
	w.frozen = c.cfg.freeze()
	w.standing = c.told.Load() && !c.shedding.Load()

	st.step(&w, c.cfg)
	c.spread.sample(ended, time.Duration(ns).Seconds(), sq, dt, w.frozen || c.shedding.Load())
	c.capacity.store(st.capacityNow)
	c.budget.Store(int64(st.budget * float64(time.Second))) // st.budget is in seconds
	c.served.Add(ended)
	c.quietCap.Store(st.quietCapAt(c.cfg))
	c.value.store(st.valueNow)
	c.reading = st.readingAt(now)
}

// SetShedding tells the signal whether the admission controller sheds
// (admit's controller calls it every period): while it does not, a queue
// up to a standing level is allowed (see "A queue that stands"). Until it
// is first called the signal always holds the latency target.
func (c *Concurrency) SetShedding(on bool) {
	c.shedding.Store(on)
	c.told.Store(true)
}

// Variability returns the squared coefficient of variation of the
// handler time of the requests that ended (Var ÷ mean², as DoneAt measures
// each), learned over about 5 s while the process is neither overloaded
// nor shedding; 0 until learned. The queue-delay signal scales its target
// by it (WithQueueSpread; Default wires it).
func (c *Concurrency) Variability() float64 { return c.spread.cv2.load() }

// Run samples every Period with real time until ctx is done.
func (c *Concurrency) Run(ctx context.Context) { run(ctx, c.cfg.period, c.SampleAt) }
