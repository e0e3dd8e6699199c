package throttle

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/epoch"
	"github.com/levee-dev/levee/internal/option"
	"github.com/levee-dev/levee/internal/smooth"
)

// Defaults of New.
const (
	// DefaultK is the SRE book's K: the client sends up to K times what the
	// backend accepted.
	DefaultK = 2.0
	// DefaultWindow is the long window, the SRE book's two minutes.
	DefaultWindow = 2 * time.Minute
	// DefaultRecovery is the time constant of the recent horizon that lets
	// local rejections fade within seconds once the backend accepts again.
	DefaultRecovery = time.Second
	// tick is how often the counters are folded and the probabilities
	// recomputed; the accept path only reads them in between.
	tick = 100 * time.Millisecond
	// longBuckets is the resolution of the long window.
	longBuckets = 24
	// minEvidence is the number of accepts the recent horizon should hold.
	minEvidence = 20
	// slack is added to the recent horizon's probability before the two
	// horizons are compared, so that the recent estimate overrides the long
	// window only when it is clearly lower, not whenever it wobbles (a
	// backend that accepts in bursts, such as a per-second quota, makes it
	// oscillate within each second; taking the bare minimum then let ≈7%
	// more reach the backend). After a recovery the recent estimate falls
	// to 1−K, far below −slack.
	slack = 0.05
	// minSent is the number of sent requests the recent horizon must hold
	// before "the backend accepted them all" is believed.
	minSent = 10
	// probeGap is the longest a criticality goes without a request sent
	// while the throttle refuses nearly all of it (probeP): when nothing
	// was sent for this long, the next request that would be refused is
	// sent as a probe. At most 5 probes a second per criticality, and none
	// while the formula itself sends.
	probeGap = 200 * time.Millisecond
	// probeP is the rejection probability from which probes are sent: a
	// throttle refusing more than 95% (an overload of 40× at K = 2, 22× at
	// K = 1.1, or an outage) sends too little to see the backend recover.
	probeP = 0.95
	// falseClean is how unlikely a run of accepts must be under the
	// backend's acceptance before the run is taken as its recovery (see
	// cleanRun).
	falseClean = 1e-5
	// minClean and maxClean bound the run of accepts that ends a throttle.
	minClean, maxClean = 3, 250
)

type config struct {
	k        float64
	window   time.Duration
	recovery time.Duration
	seed     uint64
	maxKeys  int
}

// Option configures New and NewGroup. An out-of-range value makes New or
// NewGroup panic (see the package documentation).
type Option func(*config)

// WithK sets K (default 2): the client sends up to K times the requests the
// backend accepted, so the backend still sees K·accepts and learns quickly
// when it recovers. 1.1 is aggressive (the backend rejects ≈9% of what
// reaches it), 2 the general default (≈50%). Range [1, +Inf) (below 1 a
// healthy backend would be throttled); 0 means the default.
func WithK(k float64) Option {
	return func(c *config) {
		option.Set(&c.k, k, k >= 1 && !math.IsInf(k, 0), "throttle", "WithK", "must be in [1, +Inf) (0 means the default, 2)")
	}
}

// WithWindow sets the long window over which requests and accepts are
// counted (default 2 minutes, the SRE book's). It is a sliding window of 24
// buckets. Range [2.4s, 24h]; 0 means the default.
func WithWindow(d time.Duration) Option {
	return func(c *config) {
		option.Set(&c.window, d, d >= longBuckets*tick && d <= 24*time.Hour, "throttle", "WithWindow", "must be in [2.4s, 24h] (0 means the default, 2m)")
	}
}

// WithRecovery sets the time constant of the recent horizon (default 1 s).
// A local rejection needs both the long window and the recent horizon to
// call for it, so once the backend accepts again rejections fade within a
// few time constants instead of the long window's tens of seconds. Range
// [0, 1h]; 0 turns the recent horizon off: the plain SRE throttle on the
// long window alone.
func WithRecovery(d time.Duration) Option {
	return func(c *config) {
		option.Check(d >= 0 && d <= time.Hour, "throttle", "WithRecovery", "must be in [0, 1h] (0 turns the recent horizon off)", d)
		c.recovery = d
	}
}

// WithSeed sets the seed of the counter-based random decisions (default 0):
// the same seed and the same sequence of calls give the same decisions.
func WithSeed(seed uint64) Option {
	return func(c *config) { c.seed = seed }
}

// WithMaxKeys bounds the number of throttles a Group keeps (default 1024).
// Range [1, 1e6]; 0 means the default. Used by NewGroup only.
func WithMaxKeys(n int) Option {
	return func(c *config) {
		option.Set(&c.maxKeys, n, n >= 1 && n <= 1e6, "throttle", "WithMaxKeys", "must be in [1, 1e6] (0 means the default, 1024)")
	}
}

func newConfig(opts []Option) config {
	c := config{k: DefaultK, window: DefaultWindow, recovery: DefaultRecovery, maxKeys: 1024}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Throttle is a client-side adaptive throttle for one backend (Google SRE
// book, ch. 21). The client counts the requests it attempts and those the
// backend accepted, and rejects new requests locally with probability
//
//	P = max(0, (requests − K·accepts) / (requests + 1))
//
// on the long window and on the recent horizon, taking the smaller: see the
// package documentation for why and for how criticalities are ordered.
//
// A request counts when its outcome is known: a local rejection at once
// (AllowAt), a sent request when the caller reports it (DoneAt, accepted
// or not). A request still in flight counts for nothing, so a slow backend
// does not look like a rejecting one: counted at the send, the first
// 300 ms of requests to a backend answering in 300 ms had no accepts to
// match, and a fresh client rejected half of its requests locally at half
// the backend's capacity.
//
// The accept path (AllowAt, DoneAt) never waits and never allocates: it
// adds to atomic counters and compares a seeded, counter-based draw with a
// threshold recomputed every 100 ms by whichever call crosses the tick
// (others carry on meanwhile). A Throttle is safe for concurrent use; a nil
// *Throttle allows everything. It holds about 3 KB.
type Throttle struct {
	k        float64
	seed     uint64
	tickUs   int64
	longUs   int64
	probeUs  int64
	recovery time.Duration // recent-horizon time constant; 0 = disabled

	// Read on every call, written once per tick: kept apart from the
	// counters every call writes.
	next   atomic.Int64                          // µs at which the next fold is due
	thresh [levee.NumCriticalities]atomic.Uint64 // P·2^64 per criticality
	_      [64]byte
	crit   [levee.NumCriticalities]counters

	mu sync.Mutex // held by the goroutine folding; the accept path never waits for it
	st state
}

type counters struct {
	req            atomic.Uint64 // AllowAt calls
	_              [56]byte
	acc, rej, done atomic.Uint64 // accepted, rejected locally, outcomes reported
	sent           atomic.Int64  // µs of the last tick with a send, or of the last probe
	_              [32]byte
}

type state struct {
	started          bool
	first, tick      int64
	longIdx          int64
	seenAcc, seenRej [levee.NumCriticalities]uint64
	seenDone         [levee.NumCriticalities]uint64
	seenReq          [levee.NumCriticalities]uint64
	recR, recA, recL [levee.NumCriticalities]float64
	longR, longA     [longBuckets][levee.NumCriticalities]uint32 // whole counts per bucket
	sumR, sumA       [levee.NumCriticalities]float64
	// run counts the accepts reported since the backend's last rejection,
	// in the ticks from runFrom on; base is the share of sent requests the
	// backend accepted, in the recent horizon, as of that rejection.
	run, base float64
	runFrom   int64
}

// New returns a Throttle with K 2, a 2-minute window and a 1-second recovery
// horizon unless options say otherwise. It panics on an option value out
// of its documented range, a programming error.
func New(opts ...Option) *Throttle {
	return newThrottle(newConfig(opts))
}

func newThrottle(c config) *Throttle {
	t := &Throttle{
		k:       c.k,
		seed:    c.seed,
		tickUs:  tick.Microseconds(),
		longUs:  (c.window / longBuckets).Microseconds(),
		probeUs: probeGap.Microseconds(),
	}
	t.recovery = c.recovery
	t.next.Store(math.MinInt64)
	return t
}

var errThrottled = &levee.RejectedError{Reason: levee.Throttled}

// ErrThrottled is the error AllowAt returns for a local rejection, a shared
// *levee.RejectedError{Reason: levee.Throttled}: errors.Is(err,
// levee.ErrThrottled) matches it. Do not modify it.
var ErrThrottled error = errThrottled

func idx(c levee.Criticality) int {
	if !c.Valid() {
		return int(levee.Critical)
	}
	return int(c)
}

// AllowAt decides at now whether a request of criticality c may be sent. It
// returns nil (send it, then report its outcome with DoneAt) or
// ErrThrottled (do not send; the local rejection is counted, nothing more
// to report). An invalid c counts as Critical. Time may come slightly out
// of order from concurrent callers. A time read from the clock (time.Now)
// counts on its monotonic reading, immune to steps of the wall clock; a
// virtual clock that jumps backwards freezes the probabilities until it
// catches up, so a new virtual-time run needs a new Throttle.
func (t *Throttle) AllowAt(now time.Time, c levee.Criticality) error {
	if t == nil {
		return nil
	}
	return t.allow(epoch.Micros(now), idx(c))
}

func (t *Throttle) allow(us int64, i int) error {
	if us >= t.next.Load() {
		t.fold(us)
	}
	s := &t.crit[i]
	n := s.req.Add(1)
	th := t.thresh[i].Load()
	// A Weyl sequence (n·2⁶⁴/φ) rather than a hash of n: equidistributed
	// like random draws but with no clustering, so the share sent over
	// any stretch of requests is 1−P almost exactly.
	if th == 0 || t.seed+n*0x9e3779b97f4a7c15 >= th {
		return nil
	}
	// A probe: the throttle refuses nearly everything and nothing of this
	// criticality was sent for probeGap, so this one goes; it is how the
	// client learns that the backend is back.
	if th >= probeThresh && t.recovery > 0 {
		if last := s.sent.Load(); us-last >= t.probeUs && s.sent.CompareAndSwap(last, us) {
			return nil
		}
	}
	s.rej.Add(1)
	return errThrottled
}

// DoneAt reports at now the outcome of a request of criticality c that
// AllowAt let through: accepted is false only when the backend rejected
// it for overload or quota (or, at the caller's choice, when the attempt
// failed without an answer, such as a refused connection or a timeout);
// any other answer, application errors included, is accepted: the backend
// did the work. An attempt abandoned by its own caller may be left
// unreported; it then counts for nothing.
func (t *Throttle) DoneAt(now time.Time, c levee.Criticality, accepted bool) {
	if t == nil {
		return
	}
	t.done(epoch.Micros(now), idx(c), accepted)
}

func (t *Throttle) done(us int64, i int, accepted bool) {
	if us >= t.next.Load() {
		t.fold(us)
	}
	s := &t.crit[i]
	if accepted {
		s.acc.Add(1)
	}
	s.done.Add(1)
}

// Allow is AllowAt on a coarse real-time clock (see the package
// documentation): it does not read the system clock on every call.
func (t *Throttle) Allow(c levee.Criticality) error {
	if t == nil {
		return nil
	}
	return t.allow(wall.now(), idx(c))
}

// Done is DoneAt on the coarse real-time clock.
func (t *Throttle) Done(c levee.Criticality, accepted bool) {
	if t == nil {
		return
	}
	t.done(wall.now(), idx(c), accepted)
}

// RejectProbabilityAt returns the probability with which AllowAt at now
// rejects a request of criticality c.
func (t *Throttle) RejectProbabilityAt(now time.Time, c levee.Criticality) float64 {
	if t == nil {
		return 0
	}
	if us := epoch.Micros(now); us >= t.next.Load() {
		t.fold(us)
	}
	return math.Ldexp(float64(t.thresh[idx(c)].Load()), -64)
}

// fold moves the counts since the last fold into the recent horizon and the
// long window and recomputes the rejection probabilities. One goroutine at a
// time does it; the others carry on with the previous probabilities.
func (t *Throttle) fold(us int64) {
	if !t.mu.TryLock() {
		return
	}
	defer t.mu.Unlock()
	if us < t.next.Load() {
		return
	}
	st := &t.st
	tk := epoch.Bucket(us, t.tickUs)
	li := epoch.Bucket(us, t.longUs)
	if !st.started {
		st.started, st.tick, st.longIdx, st.first = true, tk, li, tk
	}
	elapsed := max(tk-st.tick, 0)
	decay := 0.0
	if t.recovery > 0 {
		decay = smooth.Decay(time.Duration(elapsed)*tick, t.horizon(tk))
	}
	if li > st.longIdx {
		for j := st.longIdx + 1; j <= li && j <= st.longIdx+longBuckets; j++ {
			b := epoch.Slot(j, longBuckets)
			for c := range st.longR[b] {
				st.sumR[c] -= float64(st.longR[b][c])
				st.sumA[c] -= float64(st.longA[b][c])
				st.longR[b][c], st.longA[b][c] = 0, 0
			}
		}
		st.longIdx = li
	}
	b := epoch.Slot(li, longBuckets)
	var doneTick, accTick float64
	for c := range t.crit {
		// Requests count when their outcome is known: local rejections
		// now, sent requests when reported. Read done before acc: an
		// outcome reported between the two loads is then counted as an
		// accept before its request, never as an unaccepted request.
		d, l := t.crit[c].done.Load(), t.crit[c].rej.Load()
		a := t.crit[c].acc.Load()
		q := t.crit[c].req.Load()
		dl, da := float64(l-st.seenRej[c]), float64(a-st.seenAcc[c])
		dd := float64(d - st.seenDone[c])
		dr := dl + dd
		if q-st.seenReq[c] > l-st.seenRej[c] {
			// Something of this criticality was sent since the last
			// fold (at the latest probe's time, or after the start of
			// the last tick): no probe is due before probeGap from then.
			if from, last := st.tick*t.tickUs, t.crit[c].sent.Load(); last < from {
				t.crit[c].sent.CompareAndSwap(last, from)
			}
		}
		st.seenDone[c], st.seenAcc[c], st.seenRej[c], st.seenReq[c] = d, a, l, q
		st.recR[c] = st.recR[c]*decay + dr
		st.recA[c] = st.recA[c]*decay + da
		st.recL[c] = st.recL[c]*decay + dl
		st.longR[b][c] += uint32(dr)
		st.longA[b][c] += uint32(da)
		st.sumR[c] += dr // whole numbers: exact in float64
		st.sumA[c] += da
		doneTick += dd
		accTick += da
	}
	if t.recovery > 0 && st.clean(tk, t.cleanTicks(), doneTick, accTick) {
		st.forget(tk)
	}
	long := ladder(&st.sumR, &st.sumA, t.k, 0)
	if t.recovery > 0 {
		var recent [levee.NumCriticalities]float64
		if !st.backendAcceptsAll() {
			recent = ladder(&st.recR, &st.recA, t.k, slack)
		}
		for c := range long {
			long[c] = min(long[c], recent[c])
		}
	}
	for c := range t.crit {
		t.thresh[c].Store(threshold(long[c]))
	}
	st.tick = tk
	t.next.Store((tk + 1) * t.tickUs)
}

// clean updates the run of accepts with the outcomes reported in tick tk
// (done of them, acc accepted) and reports whether the run now shows that
// the backend recovered while the client was throttling itself.
//
// Under the state that made the client throttle, the backend accepted a
// share base of what it was sent (about 1/K in an overloaded steady state,
// about 0 in an outage), so a run of n accepts in a row has probability
// base^n: a run longer than log(falseClean)/log(base) (cleanRun) is taken
// as a change of state, a sequential test with a false-alarm probability of
// falseClean per run. After an outage a few accepted probes suffice (3
// when base is near 0); in a steady state at K = 2 it takes 17 accepts in
// a row, at K = 1.1 121, which the formula's own sends provide within a
// second or two once the backend accepts them all. The run must also span
// span ticks (the recent horizon): a backend that accepts in bursts (a
// per-second quota accepts its first requests of every second) would
// otherwise look recovered at each burst. A tick with any rejection ends
// the run (the order inside a tick is unknown).
func (st *state) clean(tk, span int64, done, acc float64) bool {
	if done-acc > 0.5 {
		st.run, st.runFrom = 0, tk+1
		var sent, accepted float64
		for c := range st.recR {
			sent += st.recR[c] - st.recL[c]
			accepted += st.recA[c]
		}
		st.base = 0
		if sent > 0 {
			st.base = accepted / sent
		}
		return false
	}
	st.run += acc
	if st.run < cleanRun(st.base) || tk-st.runFrom+1 < span {
		return false
	}
	// Forget only what makes the client throttle: a healthy history is
	// what keeps a short spike from triggering the throttle at all.
	var r, a float64
	for c := range st.sumR {
		r += st.sumR[c]
		a += st.sumA[c]
	}
	return r > a
}

// cleanRun is the number of accepts in a row that ends a throttle set
// under a backend acceptance of base (see clean).
func cleanRun(base float64) float64 {
	if !(base > 0) {
		return minClean
	}
	if base >= 1 {
		return maxClean
	}
	return min(max(math.Ceil(math.Log(falseClean)/math.Log(base)), minClean), maxClean)
}

// cleanTicks is the span, in ticks, a run of accepts must cover to end a
// throttle: the recent horizon's time constant.
func (t *Throttle) cleanTicks() int64 { return int64(max(t.recovery/tick, 1)) }

// forget drops the history (both horizons) when the backend has shown it
// recovered: an outage in the 2-minute window must not outvote a recent
// run of accepts. The formula starts again from what comes next.
func (st *state) forget(tk int64) {
	st.recR, st.recA, st.recL = [levee.NumCriticalities]float64{}, [levee.NumCriticalities]float64{}, [levee.NumCriticalities]float64{}
	st.longR, st.longA = [longBuckets][levee.NumCriticalities]uint32{}, [longBuckets][levee.NumCriticalities]uint32{}
	st.sumR, st.sumA = [levee.NumCriticalities]float64{}, [levee.NumCriticalities]float64{}
	st.first, st.run = tk, 0
}

// backendAcceptsAll reports whether the recent horizon holds enough sent
// requests and (almost) no backend rejection among them. The formula alone
// can only grow what it sends by a factor K per horizon, so after a long
// throttle it would take many horizons to learn that the backend recovered
// (about 10 s for K = 1.1 after a 3× spike). In an overloaded steady state
// the backend always rejects a share 1 − 1/K of what it receives, so a
// recent horizon without any rejection means the deficit is the client's
// own: it is forgotten. If the backend is in fact still short of capacity,
// its first rejections restore the formula within one tick.
func (st *state) backendAcceptsAll() bool {
	var sent, acc float64
	for c := range st.recR {
		sent += st.recR[c] - st.recL[c]
		acc += st.recA[c]
	}
	return sent >= minSent && sent-acc < 0.5
}

// horizon returns the recent horizon's time constant: the configured one, stretched so that it holds about minEvidence accepts at
// the long window's accept rate. A backend that accepts only a few requests
// a second would otherwise leave the recent estimate so noisy that taking
// the smaller of the two estimates would bias the steady state upward.
func (t *Throttle) horizon(tk int64) time.Duration {
	st := &t.st
	var a float64
	for c := range st.sumA {
		a += st.sumA[c]
	}
	span := float64(min(tk-st.first+1, longBuckets*t.longUs/t.tickUs))
	if a <= 0 {
		return t.recovery
	}
	return max(t.recovery, time.Duration(minEvidence*span/a*float64(tick)))
}

// ladder applies the SRE formula to the sum over criticalities — the
// backend's capacity is shared — and assigns the resulting local rejections
// to the lowest criticality first: with one criticality in use it is
// exactly P = max(0, (R − K·A)/(R + 1)).
func ladder(r, a *[levee.NumCriticalities]float64, k, slack float64) (p [levee.NumCriticalities]float64) {
	var rt, at float64
	for c := range r {
		rt += r[c]
		at += a[c]
	}
	d := rt - k*at + slack*rt
	for _, c := range levee.Criticalities() {
		if d <= 0 {
			break
		}
		take := min(d, r[c])
		p[c] = take / (r[c] + 1)
		d -= take
	}
	return p
}

// probeThresh is threshold(probeP).
var probeThresh = threshold(probeP)

func threshold(p float64) uint64 {
	if !(p > 0) {
		return 0
	}
	x := math.Ldexp(p, 64)
	if x >= math.Ldexp(1, 64) {
		return math.MaxUint64
	}
	return uint64(x)
}

// Stats are a Throttle's counters, for metrics. Counters are cumulative
// since New; index them by levee.Criticality.
type Stats struct {
	// Requests counted by AllowAt, local rejections included.
	Requests [levee.NumCriticalities]uint64
	// Outcomes reported by DoneAt, accepted or not.
	Completed [levee.NumCriticalities]uint64
	// Accepts reported by DoneAt.
	Accepts [levee.NumCriticalities]uint64
	// Rejected locally by AllowAt.
	Rejected [levee.NumCriticalities]uint64
	// Probability of a local rejection as of the last fold.
	Probability [levee.NumCriticalities]float64
}

// Stats returns the counters. It does not allocate.
func (t *Throttle) Stats() Stats {
	var s Stats
	if t == nil {
		return s
	}
	for c := range t.crit {
		s.Requests[c] = t.crit[c].req.Load()
		s.Completed[c] = t.crit[c].done.Load()
		s.Accepts[c] = t.crit[c].acc.Load()
		s.Rejected[c] = t.crit[c].rej.Load()
		s.Probability[c] = math.Ldexp(float64(t.thresh[c].Load()), -64)
	}
	return s
}
