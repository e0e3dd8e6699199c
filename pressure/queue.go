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

// QueueDelay is the time requests waited between their arrival and the
// start of their handler, in seconds. It implements levee.Signal with Name
// "queue_delay"; its Target is learned from the service (see below).
//
// The reading follows CoDel (Nichols and Jacobson, "Controlling Queue
// Delay"): the value of an interval (default 100 ms) is the minimum delay
// observed during it. A burst that drains quickly leaves some requests with
// short waits and reads low; a standing queue — every request of the
// interval waited longer than the target — reads high. An interval without
// any observation reads 0 (no handler started: the server is idle, or stuck,
// which the CPU and scheduler signals see). Value is NaN until the first
// interval closes. No smoothing by default: the interval minimum is already
// a robust statistic.
//
// # The target
//
// What counts as a standing queue depends on the service: a server of
// 10 ms requests on 3 cores waits longer at 90% load than one of 1 ms
// requests on 64, and neither is overloaded. The queue before the handler
// drains at the rate the CPU completes requests, so the target is a number
// of per-core CPU times per request (the time between completions of a
// saturated core):
//
//	scale  = CPU utilisation ÷ requests observed per second
//	         (CPU seconds per request ÷ cores; the same at any load)
//	spread = (1 + cv²) ÷ 2 within [1, 16], cv the coefficient of variation
//	         of the handler time (WithQueueSpread; 1 without)
//	target = clamp(100 × scale × spread, floor,
//	               min(ceiling, min(spread ÷ 4, ½) × callers' median budget))
//
// With the factor 100 the interval minimum of an M/M/c queue stays below
// the target at load 0.9 in every interval and at load 0.95 in at least
// 98% of them, for 1, 3, 32 and 64 cores at 1 ms, 10 ms, 100 ms and 1 s
// per request (M/D/c: in all of them; TestQueueTargetFits); at 1.2× it is
// above the target in at least 99.8% of them. Handler times more variable
// than exponential ones queue longer at the same load — about (1 + cv²)
// ÷ 2 times as long (Pollaczek–Khinchine) — and spread keeps the same
// margins for them (lognormal with cv 3 and 6: TestQueueTargetFits); a
// constant or exponential service keeps spread 1. Floor and ceiling
// default to 5 ms (CoDel's target: below it, waits are scheduler noise)
// and 1 s (WithQueueBounds); a share of the callers' median budget (the
// Concurrency signal learns it) bounds the wait a caller can afford before
// its handler even starts: a quarter, up to half for a service whose own
// variability queues that long below its capacity. (Still, one core of
// lognormal 1 ms requests with cv 3 whose callers give 200 ms queues
// past half of that in some intervals at load 0.9, and levee sheds 2–6 %
// of it where the unprotected tier serves 99 %: 3–7 % under a quarter;
// with 1 s budgets nothing.) The scale is learned with WithQueueCPU (Default
// passes its CPU signal), as an EWMA over 5 s, per request served when
// the signal is told how many were (WithQueueServed; Default passes its
// concurrency signal's count), and then also while overloaded; per
// request observed otherwise, and then not while the freeze function says
// the process is overloaded (WithQueueFreeze; Default: another signal of
// the set above its target), nor while the admission controller sheds
// (SetShedding). Until it has learned, or
// without a CPU source, the target is 100 ms within the same bounds.
// WithQueueTarget, and SetTarget while it runs, fix it instead.
//
// # Bursts
//
// The target catches a standing queue within a few intervals: under a
// lasting overload a longer queue serves nothing more and adds latency.
// A burst is different: load at 1.4 times the capacity for a second and
// 0.4 the next is 0.9 of it on average, and a queue that absorbs the
// burst serves it in the quiet second, in time, where a queue held to
// the target refuses the excess and idles later. So a queue that rises
// above half the learned target while the admission controller does not
// shed is held to the burst level — half the callers' median budget,
// within the ceiling — instead, for at most the burst allowance, twice
// that budget within [1 s, 5 s], then on a slope back to the target
// over as long again; the spell ends when the queue falls below half
// the target, and none starts while the controller sheds (see
// burst.go). Without a learned budget there is no burst level. Target
// and Reading say which is in force; Bursting reports the burst.
//
// Observe is lock-free and does not allocate; Value and Target are atomic
// reads. Safe for concurrent use.
type QueueDelay struct {
	min   atomic.Int64 // minimum delay of the open interval, ns; noObservation when none
	_     [56]byte     // keep the contended words apart from each other and the fields below
	count atomic.Int64 // observations in the open interval
	_     [56]byte

	cfg    queueConfig
	value  atomicFloat
	target atomicFloat
	fixed  atomic.Int64 // a fixed target, ns (WithQueueTarget, SetTarget); 0 = learned
	shed   atomic.Bool  // the admission controller sheds (SetShedding)

	mu      sync.Mutex
	lastAt  time.Time
	avg     smooth.EWMA
	scale   float64 // learned CPU seconds per request per core; 0 = not yet
	accN    int64   // observations, CPU seconds per core and time accumulated towards the next
	accCPU  float64 // scale update
	accDt   time.Duration
	served  int64 // the served count at the last sample (WithQueueServed)
	burst   burst // a rising queue's allowance (burst.go)
	reading QueueReading
}

const noObservation = math.MaxInt64

var _ levee.Signal = (*QueueDelay)(nil)

// Queue target parameters (see QueueDelay).
const (
	queueScaleFactor = 100
	queueScaleTau    = 5 * time.Second
	queueUnlearned   = 100 * time.Millisecond
	queueMinObserved = 10 // observations an interval needs to teach the scale
)

type queueConfig struct {
	fixed    time.Duration // 0 = learned
	floor    float64       // seconds
	ceiling  float64       // seconds
	interval time.Duration
	tau      time.Duration
	cpu      func() float64
	budget   func() time.Duration
	spread   func() float64 // squared coefficient of variation of the service time; nil = none
	freeze   func() bool
	served   func() int64 // cumulative requests served; nil: count the observed
}

// QueueOption configures a QueueDelay.
type QueueOption func(*queueConfig, *checker)

// WithQueueTarget fixes the target instead of learning it (see
// QueueDelay). Range (0, 1m]; 0 means the default, a learned target.
func WithQueueTarget(d time.Duration) QueueOption {
	return func(c *queueConfig, ch *checker) {
		set(ch, &c.fixed, d, d > 0 && d <= time.Minute, "WithQueueTarget", "must be in (0, 1m] (0 means the default, learned)")
	}
}

// WithQueueBounds sets the floor and the ceiling of the learned target.
// Default 5ms and 1s; range 0 < floor ≤ ceiling ≤ 1m; a 0 means that
// bound's default.
func WithQueueBounds(floor, ceiling time.Duration) QueueOption {
	return func(c *queueConfig, ch *checker) {
		f, h := c.floor, c.ceiling
		if floor != 0 {
			f = floor.Seconds()
		}
		if ceiling != 0 {
			h = ceiling.Seconds()
		}
		ch.check(f > 0 && h >= f && h <= 60, "WithQueueBounds",
			"want 0 < floor ≤ ceiling ≤ 1m (0 means the default, 5ms and 1s)", floor, ceiling)
		c.floor, c.ceiling = f, h
	}
}

// WithQueueCPU sets the function returning the process's CPU utilisation
// (a fraction of the cores it may use, as CPU.Value) from which the
// target's scale is learned. Default: none (the target stays at its
// unlearned value). NaN readings teach nothing; nil restores the default.
func WithQueueCPU(f func() float64) QueueOption {
	return func(c *queueConfig, _ *checker) {
		if f != nil {
			c.cpu = f
		}
	}
}

// WithQueueBudget sets the function returning the callers' median time
// budget (as Concurrency.Budget; 0 = unknown), a quarter of which caps the
// target (up to half with WithQueueSpread: see QueueDelay). Default:
// none. nil restores the default.
func WithQueueBudget(f func() time.Duration) QueueOption {
	return func(c *queueConfig, _ *checker) {
		if f != nil {
			c.budget = f
		}
	}
}

// WithQueueSpread sets the function returning the squared coefficient of
// variation of the service time (as Concurrency.Variability; 0 =
// unknown). The learned target is multiplied by (1 + cv²) ÷ 2, within
// [1, 16]: a queue before handlers whose times vary more than
// exponentially waits that much longer at the same load (see QueueDelay).
// Default: none (factor 1). nil restores the default.
func WithQueueSpread(f func() float64) QueueOption {
	return func(c *queueConfig, _ *checker) { c.spread = f }
}

// WithQueueFreeze sets the function that says the process is overloaded:
// while it returns true the target's scale is not learned. Default:
// never. nil restores the default.
func WithQueueFreeze(f func() bool) QueueOption {
	return func(c *queueConfig, _ *checker) {
		if f != nil {
			c.freeze = f
		}
	}
}

// WithQueueServed sets the function returning the cumulative number of
// requests the process has served (ran a handler for: Concurrency.Served
// in Default). The target's scale is then CPU per request served, learned
// also while the process is overloaded or sheds: a refused request costs
// little and is not counted, and what a served one costs is what the
// queue drains at. Without it the scale is CPU per request observed,
// which refusals dilute, so it is not learned while overloaded or
// shedding — and a process that starts in an overload keeps what its
// first seconds taught (on 64 cores of 1 s requests started at 5× of
// capacity: a scale of 2 ms for 16, a target of 0.2 s for 1, and goodput
// 0.75 of capacity for the whole run; the simulator's sweep). Until the
// count moves (nothing feeds it) the observed requests teach, as without
// it. Default: none; nil restores it.
func WithQueueServed(f func() int64) QueueOption {
	return func(c *queueConfig, _ *checker) { c.served = f }
}

// WithQueueInterval sets the interval over which the minimum is taken,
// which is also Run's sampling period. Default 100ms (CoDel's interval);
// range [10ms, 1m]; 0 means the default. It should exceed the usual time
// between requests.
func WithQueueInterval(d time.Duration) QueueOption {
	return func(c *queueConfig, ch *checker) { ch.period("WithQueueInterval", d, &c.interval) }
}

// WithQueueSmoothing sets an EWMA time constant over the interval minima.
// Default 0 (none); range [0, 1m].
func WithQueueSmoothing(d time.Duration) QueueOption {
	return func(c *queueConfig, ch *checker) { ch.smoothing("WithQueueSmoothing", d, &c.tau) }
}

// NewQueueDelay returns a queueing delay signal. It panics with a
// "pressure: ..." message on an out-of-range option, a programming error.
func NewQueueDelay(opts ...QueueOption) *QueueDelay {
	cfg := queueConfig{
		floor: 0.005, ceiling: 1, interval: 100 * time.Millisecond,
		budget: func() time.Duration { return 0 },
		freeze: func() bool { return false },
	}
	var ch checker
	for _, o := range opts {
		o(&cfg, &ch)
	}
	ch.mustValid()
	q := &QueueDelay{cfg: cfg, avg: smooth.EWMA{Tau: cfg.tau}}
	q.min.Store(noObservation)
	q.value.store(math.NaN())
	q.fixed.Store(int64(cfg.fixed))
	q.target.store(q.targetFor(0))
	q.reading = QueueReading{Value: math.NaN(), Min: math.NaN(), Target: q.Target()}
	return q
}

// targetFor returns the target for a learned scale (0: not learned).
func (q *QueueDelay) targetFor(scale float64) float64 {
	if f := time.Duration(q.fixed.Load()); f > 0 {
		return f.Seconds()
	}
	f := q.spreadFactor()
	hi := q.cfg.ceiling
	if b := q.cfg.budget(); b > 0 {
		hi = math.Min(hi, b.Seconds()*math.Min(f/4, 0.5))
	}
	t := queueUnlearned.Seconds()
	if scale > 0 {
		t = queueScaleFactor * scale * f
	}
	return math.Max(math.Min(t, hi), q.cfg.floor)
}

// spreadFactor is the target's factor for the service time's variability
// (WithQueueSpread), 1 without it.
func (q *QueueDelay) spreadFactor() float64 {
	if q.cfg.spread == nil {
		return 1
	}
	return spreadFactor(q.cfg.spread())
}

// Name returns "queue_delay".
func (q *QueueDelay) Name() string { return "queue_delay" }

// Value returns the latest interval's minimum delay in seconds (smoothed if
// configured), NaN before the first interval closes.
func (q *QueueDelay) Value() float64 { return q.value.load() }

// Target returns the target delay in seconds (see QueueDelay).
func (q *QueueDelay) Target() float64 { return q.target.load() }

// Period returns the interval, Run's sampling period.
func (q *QueueDelay) Period() time.Duration { return q.cfg.interval }

// Observe records that a request waited d between its arrival (the
// earliest timestamp the server has: a listener or ConnContext time) and
// the start of its handler. Negative d counts as 0. Lock-free, no
// allocation, no system call: an atomic add, and a compare-and-swap when
// d is a new minimum.
func (q *QueueDelay) Observe(d time.Duration) {
	q.count.Add(1)
	n := max(int64(d), 0)
	for {
		cur := q.min.Load()
		if n >= cur || q.min.CompareAndSwap(cur, n) {
			return
		}
	}
}

// QueueReading is the detail of the latest interval.
type QueueReading struct {
	Time time.Time
	// Value is what Value returns, seconds.
	Value float64
	// Min is the interval's minimum delay in seconds, 0 without observations.
	Min float64
	// Observed reports whether any request was observed in the interval.
	Observed bool
	// Target is what Target returns, seconds; Scale the learned CPU
	// seconds per request per core it derives from (0: not learned), and
	// Spread the factor for the service time's variability it was
	// multiplied by (WithQueueSpread; 1 without).
	Target, Scale, Spread float64
	// Frozen reports that the freeze function held the scale at this
	// interval.
	Frozen bool
	// Burst reports that Target is the burst level or on its slope back
	// to the learned target (see Bursting).
	Burst bool
}

// SetShedding tells the signal whether the admission controller sheds;
// package admit's Controller calls it every period. While it sheds, the
// target's scale is not learned, whatever the other signals read: most
// requests observed are then refused, and the CPU per request observed
// says nothing of the CPU per request served (a flood of five times the
// capacity would teach a fifth of the scale, and the target would fall
// with it, cutting admission further).
func (q *QueueDelay) SetShedding(on bool) { q.shed.Store(on) }

// Bursting reports that the target is the burst level or on its slope
// back: the queue rose above half the learned target while the admission
// controller did not shed, and has not been held to the target since
// (see QueueDelay). Package admit's run queue then stays first-come
// first-served with its configured wait.
func (q *QueueDelay) Bursting() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.burst.active()
}

// Reading returns the detail of the latest interval.
func (q *QueueDelay) Reading() QueueReading {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.reading
}

// SampleAt closes the interval at now and starts the next one. A sample
// less than half an interval after the previous one is skipped: the
// interval stays open (a short interval's minimum is biased upwards).
func (q *QueueDelay) SampleAt(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	first := q.lastAt.IsZero()
	dt, ok := advance(&q.lastAt, now, q.cfg.interval)
	if !ok {
		return
	}
	m := q.min.Swap(noObservation)
	n := q.count.Swap(0)
	raw, observed := 0.0, m != noObservation
	if observed {
		raw = time.Duration(m).Seconds()
	}
	frozen := q.cfg.freeze() || q.shed.Load()
	if q.cfg.served != nil {
		// Served requests are what the scale is about, overloaded or
		// not; a count that never moved is not fed (nothing calls the
		// concurrency signal), and the observed requests teach instead.
		if served := q.cfg.served(); served > 0 {
			n, frozen = served-q.served, false
			if q.served == 0 {
				// The count starts moving: what it holds may span more
				// than this interval's CPU. Learn from the next one.
				n, frozen = 0, true
			}
			q.served = served
		}
	}
	if !first { // the first interval's start, and so its CPU, is unknown
		q.learn(n, dt, frozen)
	}
	v := q.avg.Update(raw, dt)
	target := q.targetFor(q.scale)
	if q.fixed.Load() == 0 {
		b := q.cfg.budget()
		target = q.burst.step(dt, v, target, burstLevel(b, q.cfg.ceiling), burstAllowance(b), q.shed.Load())
	}
	q.target.store(target)
	q.value.store(v)
	q.reading = QueueReading{Time: now, Value: v, Min: raw, Observed: observed, Target: target, Scale: q.scale, Spread: q.spreadFactor(), Frozen: frozen, Burst: q.burst.active()}
}

// learn accumulates the intervals' observations and CPU until they hold
// enough requests, then moves the scale (CPU seconds per request per core)
// towards what they show; a frozen interval discards the accumulation.
func (q *QueueDelay) learn(n int64, dt time.Duration, frozen bool) {
	if q.cfg.cpu == nil || dt <= 0 {
		return
	}
	u := q.cfg.cpu()
	if frozen || !(u >= 0) || math.IsInf(u, 0) {
		q.accN, q.accCPU, q.accDt = 0, 0, 0
		return
	}
	q.accN += n
	q.accCPU += u * dt.Seconds()
	q.accDt += dt
	if q.accN < queueMinObserved {
		return
	}
	x := q.accCPU / float64(q.accN)
	if q.scale == 0 {
		q.scale = x
	} else {
		q.scale += smooth.Alpha(q.accDt, queueScaleTau) * (x - q.scale)
	}
	q.accN, q.accCPU, q.accDt = 0, 0, 0
}

// Run closes an interval every Period with real time until ctx is done.
// Unlike the other signals its first value comes one interval after the
// start, not at once.
func (q *QueueDelay) Run(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	q.mu.Lock()
	if q.lastAt.IsZero() {
		q.lastAt = time.Now()
	}
	q.mu.Unlock()
	ticks(ctx, q.cfg.interval, q.SampleAt)
}
