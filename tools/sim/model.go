package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
	"github.com/levee-dev/levee/tools/report"
)

// What crosses the simulated wire. A mid-tier's failure reaches its caller
// as the levee rejection it carries (the headers of DESIGN.md) or, without
// one, as a bare 502: Go error values do not travel between processes.
type wireError struct{ msg string }

func (e *wireError) Error() string { return "sim: " + e.msg }

// connError is a connection failure. It matches its errno with errors.Is
// but has no Unwrap, which keeps the chains the policies walk short.
type connError struct {
	msg   string
	errno syscall.Errno
}

func (e *connError) Error() string        { return "sim: " + e.msg }
func (e *connError) Is(target error) bool { return target == e.errno }

var (
	// errRefused: nothing listening (instance down, failing, queue full) or
	// no healthy instance behind the load balancer. Unsent.
	errRefused error = &connError{"connection refused", syscall.ECONNREFUSED}
	// errReset: the instance crashed with the request in flight.
	errReset error = &connError{"connection reset", syscall.ECONNRESET}
	// errUpstream: a mid-tier's downstream failed without a levee rejection.
	errUpstream error = &wireError{"502 bad gateway"}
	// errTimeout: the caller stopped waiting (the overall deadline).
	errTimeout = context.DeadlineExceeded
	// errAttemptTimeout: an attempt ran out of its own time while the call
	// had time left; retryable, exactly as retry.Do treats it.
	errAttemptTimeout = retry.Retryable(context.DeadlineExceeded)
	// errCanceled: the caller went away and told us (propagated cancellation).
	errCanceled = context.Canceled
)

// Naive callers retry every failure: the same errors marked retryable once.
var (
	naiveRefused  = retry.Retryable(errRefused)
	naiveReset    = retry.Retryable(errReset)
	naiveUpstream = retry.Retryable(errUpstream)
	naiveTimeout  = retry.Retryable(context.DeadlineExceeded)
)

// rej returns the levee rejection err carries, or nil; it avoids
// errors.As for the simulator's own errors.
func rej(err error) *levee.RejectedError {
	switch e := err.(type) {
	case nil:
		return nil
	case *levee.RejectedError:
		return e
	case *wireError, *connError:
		return nil
	}
	switch err {
	case errRefused, errReset, errTimeout, errCanceled, errAttemptTimeout,
		naiveRefused, naiveReset, naiveUpstream, naiveTimeout:
		return nil
	}
	return levee.AsRejected(err)
}

func naive(err error) error {
	switch err {
	case errRefused:
		return naiveRefused
	case errReset:
		return naiveReset
	case errUpstream:
		return naiveUpstream
	case errTimeout, errAttemptTimeout:
		return naiveTimeout
	}
	if r := rej(err); r != nil && !r.NoRetry {
		return retry.Retryable(err)
	}
	return err
}

// onWire returns what the caller of a tier sees of err.
func onWire(err error) error {
	if err == nil {
		return nil
	}
	switch err {
	case errRefused, errReset, errUpstream:
		return err
	}
	if r := rej(err); r != nil {
		return r
	}
	return errUpstream
}

var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// reqCtx is the context a server sees for a job: the caller's levee.Call,
// its deadline, and cancellation once the caller went away. It lives inside
// the job, so passing it as a context.Context does not allocate.
type reqCtx struct {
	parent   context.Context
	deadline time.Time
	j        *job
}

func (c *reqCtx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }
func (c *reqCtx) Done() <-chan struct{} {
	if c.j.gone {
		return closed
	}
	return nil
}
func (c *reqCtx) Err() error {
	if c.j.gone {
		return context.Canceled
	}
	return nil
}
func (c *reqCtx) Value(k any) any { return c.parent.Value(k) }

// caller is a retrying client: a population of end users or the client a
// tier instance uses for its downstream calls.
type caller struct {
	target         *tierRT
	policy         retry.Policy
	naive          bool
	attemptTimeout int64
	timeout        int64
	lane           *lane // attempt timers of attemptTimeout
	thr            *throttle.Throttle
	pop            *population // nil for a tier's downstream client
}

// call is one logical request of a caller, over all its attempts.
type call struct {
	from     *caller
	parent   *job // the job waiting for this downstream call; nil for end users
	pop      *population
	att      retry.Attempts
	crit     levee.Criticality
	tenant   int32
	start    int64
	deadline int64
	cur      *job
	gen      uint32
	done     bool
}

type jobState uint8

const (
	jQueued jobState = iota
	jRunning
	jDownstream
)

// job is one attempt of a call at one instance.
type job struct {
	c        *call // valid only while !gone: a gone job's call may be reused
	inst     *instance
	pop      *population
	tenant   int32
	crit     levee.Criticality
	arrive   int64
	deadline int64 // the caller's deadline for this attempt
	svcStart int64
	cpu      int64
	child    *call
	rej      error
	ticket   admit.Ticket
	start    pressure.Start // its handler's start, for the concurrency signal
	// paused is the concurrency signal its handler is paused from while
	// its downstream call waits out a backoff (nil: not paused), since
	// pausedAt; pausedNs sums its finished pauses.
	paused   *pressure.Concurrency
	pausedAt int64
	pausedNs int64
	ctx      reqCtx
	prev     *job
	next     *job
	gen      uint32
	state    jobState
	gone     bool
	admitted bool
}

type instance struct {
	w     *world
	rng   *rand.Rand // service times; per instance, independent of the run
	tier  *tierRT
	idx   int // within the tier
	gidx  int // within the world
	name  string
	site  string
	cores int

	busy     int
	inflight int
	q        []*job // ring
	qh, qn   int
	head     job // sentinel of the in-flight list

	crashed    bool // crashed and not yet restarted: serves nothing
	restartGen uint32
	upSince    int64
	failUntil  int64
	slow       float64
	capF       float64

	// levee's own signals, driven by virtual time: CPU reads the busy
	// core-time, queue delay observes each request's wait for a core.
	ctrl       *admit.Controller
	ov         *overload.Manager // the memory rule of a protected instance (memory.go)
	cpu        *pressure.CPU
	qd         *pressure.QueueDelay
	conc       *pressure.Concurrency
	downstream *caller // the client of the tier's downstream calls

	busyAcc, busyT int64 // integral of busy cores (core·ns) up to busyT
	tickAcc        int64
	qdSum, qdN     int64
	qdNext         int64
	concNext       int64
	strikes        int

	// counters, per bucket
	recv, served, rejected []int32
	util, inflightMax      []float32
	qdMax                  []float32 // worst per-period mean queueing delay, s
	state                  []uint8   // 0 up, 1 cold, 2 down
	bucketAcc              int64
	crashes                int
	peakInflight           int
	recent                 [10]int32 // arrivals per 100 ms slot, for crash reports
	recentSlot             int64
	byReason               [levee.Throttled + 1]int64
	totalRecv              int64
}

type tierRT struct {
	cfg       *Tier
	insts     []*instance
	rr        int
	protect   bool
	propagate bool
	meanSvc   float64 // ns
	recv      []int64
}

type population struct {
	// rng draws arrivals, criticalities and tenants. Its stream depends on
	// the seed and the population only, so every run of a scenario sees
	// the same demand (common random numbers).
	rng    *rand.Rand
	lane   *lane // its pending arrival
	cfg    *Client
	caller *caller
	idx    int
	gen    uint32
	mix    [levee.NumCriticalities]float64
	// ctxs[(crit*tenants+tenant)*maxAtt+attempt], built lazily.
	ctxs    []context.Context
	tenants []string
	maxAtt  int
}

type world struct {
	s      *Scenario
	run    RunSpec
	levee  bool
	thr    bool
	q      queue
	now    int64
	end    int64
	rng    *rand.Rand
	pops   []*population
	tiers  []*tierRT
	byName map[string]*tierRT
	insts  []*instance

	phase    int
	scale    float64
	phaseEnd []int64
	period   int64
	bucket   int64
	nb       int

	// client-level series
	offered, attempted, throttled, goodput, rejected, failed []int64
	latSum                                                   []float64

	// per phase and criticality: offered (at creation), attempts (at
	// sending) and outcomes (at completion)
	crit [][levee.NumCriticalities]report.Tally

	crashes   []report.Crash
	wasted    int64 // core·ns spent on work whose caller had gone
	busyAll   int64 // core·ns of all work and rejections
	rejectCPU int64 // core·ns spent rejecting
	requests  int64 // simulated requests: attempts sent to a load balancer

	lanes     []*lane
	freeJobs  []*job
	freeCalls []*call
	progress  func(float64)
	nextProg  int64
}

func (w *world) laneFor(d int64) *lane {
	for _, l := range w.lanes {
		if l.d == d {
			return l
		}
	}
	l := &lane{d: d}
	w.lanes = append(w.lanes, l)
	return l
}

// next removes and returns the earliest event of the heap and the lanes.
func (w *world) next() (event, bool) {
	var best *event
	bi := -1
	if len(w.q.h) > 0 {
		best = &w.q.h[0]
	}
	for i, l := range w.lanes {
		if l.n > 0 {
			if h := l.head(); best == nil || h.before(best) {
				best, bi = h, i
			}
		}
	}
	switch {
	case best == nil:
		return event{}, false
	case bi < 0:
		return w.q.pop(), true
	}
	return w.lanes[bi].pop(), true
}

func (w *world) newJob() *job {
	if n := len(w.freeJobs); n > 0 {
		j := w.freeJobs[n-1]
		w.freeJobs = w.freeJobs[:n-1]
		return j
	}
	j := new(job)
	j.ctx.j = j
	return j
}

func (w *world) freeJob(j *job) {
	g := j.gen + 1
	*j = job{gen: g}
	j.ctx.j = j
	w.freeJobs = append(w.freeJobs, j)
}

func (w *world) newCall() *call {
	if n := len(w.freeCalls); n > 0 {
		c := w.freeCalls[n-1]
		w.freeCalls = w.freeCalls[:n-1]
		return c
	}
	return new(call)
}

func (w *world) freeCall(c *call) {
	g := c.gen + 1
	*c = call{gen: g}
	w.freeCalls = append(w.freeCalls, c)
}

func (w *world) at(t int64, e event) {
	e.t = t
	w.q.push(e)
}

func (w *world) bkt(t int64) int {
	b := int(t / w.bucket)
	if b >= w.nb {
		b = w.nb - 1
	}
	return b
}

// ---- clients ----

func (w *world) scheduleArrival(p *population) {
	rate := p.cfg.RateRPS * w.scale
	if rate <= 0 {
		return
	}
	dt := int64(p.rng.ExpFloat64() / rate * 1e9)
	t := w.now + dt
	if t >= w.phaseEnd[w.phase] {
		return // the phase change reschedules (exponential gaps are memoryless)
	}
	e := event{t: t, kind: evArrival, i: int32(p.idx), gen: p.gen}
	if l := p.lane; l.n == 0 || l.tail() <= t {
		w.q.seq++
		e.seq = w.q.seq
		l.push(e) // one pending arrival per population: spare the heap
		return
	}
	w.at(t, e)
}

func (w *world) arrival(p *population) {
	w.scheduleArrival(p)
	c := w.newCall()
	c.from = p.caller
	c.pop = p
	u := p.rng.Float64()
	cr := levee.Critical
	for i, cum := range p.mix {
		if u < cum {
			cr = levee.Criticality(i)
			break
		}
	}
	c.crit = cr
	if len(p.tenants) > 1 {
		c.tenant = int32(p.rng.IntN(len(p.tenants)))
	}
	c.start = w.now
	c.deadline = w.now + p.caller.timeout
	c.att.Init(p.caller.policy, at(w.now), at(c.deadline))
	w.offered[w.bkt(w.now)]++
	w.crit[w.phase][cr].Offered++
	w.send(c)
}

func (p *population) ctx(cr levee.Criticality, tenant int32, attempt int) context.Context {
	if attempt >= p.maxAtt {
		attempt = p.maxAtt - 1
	}
	i := (int(cr)*len(p.tenants)+int(tenant))*p.maxAtt + attempt
	if p.ctxs[i] == nil {
		p.ctxs[i] = levee.WithCall(context.Background(), levee.Call{Criticality: cr, Tenant: p.tenants[tenant], Attempt: attempt})
	}
	return p.ctxs[i]
}

// send makes the call's next attempt now.
func (w *world) send(c *call) {
	cl := c.from
	now := w.now
	if cl.thr != nil {
		if err := cl.thr.AllowAt(at(now), c.crit); err != nil {
			w.outcome(c, err)
			return
		}
	}
	if cl.pop != nil {
		w.attempted[w.bkt(now)]++
		w.crit[w.phase][c.crit].Attempted++
	}
	w.requests++
	attDL := min(c.deadline, now+cl.attemptTimeout)
	inst := cl.target.pick()
	if inst == nil {
		w.outcome(c, errRefused)
		return
	}
	j := w.newJob()
	j.c = c
	j.inst = inst
	j.arrive = now
	attempt := c.att.Attempt()
	j.crit, j.tenant, j.pop = c.crit, c.tenant, c.pop
	j.ctx.parent = c.pop.ctx(c.crit, c.tenant, attempt)
	j.ctx.deadline = at(attDL)
	j.deadline = attDL
	c.cur = j
	c.gen++
	if p := c.parent; p != nil && attDL == p.deadline && p.inst.tier.propagate {
		// The caller's own timer fires at this very instant and its
		// cancellation ends this call: no timer of our own.
		w.arrive(inst, j)
		return
	}
	e := event{t: attDL, kind: evAttemptTimer, c: c, gen: c.gen}
	if l := cl.lane; attDL == now+cl.attemptTimeout && (l.n == 0 || l.tail() <= attDL) {
		w.q.seq++
		e.seq = w.q.seq
		l.push(e)
	} else {
		w.q.push(e)
	}
	w.arrive(inst, j)
}

// outcome handles the end of an attempt that the caller was still waiting
// for: success, an error from the server, or a local refusal.
func (w *world) outcome(c *call, err error) {
	c.cur = nil
	c.gen++
	cl := c.from
	if cl.thr != nil && !errors.Is(err, levee.ErrThrottled) { // a local refusal is counted by AllowAt
		cl.thr.DoneAt(at(w.now), c.crit, accepted(err))
	}
	if err == nil {
		w.finish(c, nil)
		return
	}
	e := err
	if cl.naive {
		e = naive(err)
	}
	wait, again := c.att.Next(at(w.now), e)
	if !again {
		if err == errAttemptTimeout {
			err = errTimeout
		}
		final := err
		if !cl.naive {
			// levee: the retry package's verdict (a *retry.GiveUpError
			// says "overloaded; no-retry" upward when it should).
			if f := c.att.Err(); f != nil && f != e {
				final = f
			}
		}
		w.finish(c, final)
		return
	}
	if wait <= time.Nanosecond { // a naive client's immediate retry
		w.send(c)
		return
	}
	w.pause(c.parent)
	w.at(w.now+int64(wait), event{kind: evRetry, c: c, gen: c.gen})
}

// accepted reports whether a response counts as accepted by the backend
// for adaptive throttling: it answered, with anything but an overload or
// quota rejection. Local throttling, timeouts and connection failures are
// not answers.
func accepted(err error) bool {
	if err == nil {
		return true
	}
	r := rej(err)
	if r == nil {
		return err == errUpstream
	}
	return r.Reason == levee.Deadline
}

// timer fires when the caller stops waiting for the current attempt.
func (w *world) timer(c *call) {
	j := c.cur
	if j != nil {
		w.abandon(j)
	}
	if w.now >= c.deadline {
		c.cur = nil
		c.gen++
		w.finish(c, errTimeout)
		return
	}
	w.outcome(c, errAttemptTimeout)
}

// abandon marks a job whose caller went away. With deadline propagation
// (levee, or a tier configured so) the cancellation reaches the job's own
// downstream call, which ends, and the job leaves its instance.
func (w *world) abandon(j *job) {
	j.gone = true
	if j.state == jDownstream && j.inst.tier.propagate && j.child != nil {
		w.cancel(j.child)
	}
}

// cancel ends a call whose caller went away.
func (w *world) cancel(c *call) {
	if c.done {
		return
	}
	if c.cur != nil {
		w.abandon(c.cur)
		c.cur = nil
	}
	c.gen++
	w.finish(c, errCanceled)
}

// finish ends a call with its final result.
func (w *world) finish(c *call, err error) {
	c.done = true
	c.gen++
	if p := c.parent; p != nil {
		p.child = nil
		w.freeCall(c)
		w.respond(p, onWire(err))
		return
	}
	b := w.bkt(w.now)
	ct := &w.crit[w.phase][c.crit]
	switch {
	case err == nil:
		w.goodput[b]++
		ct.Goodput++
		w.latSum[b] += float64(w.now-c.start) / 1e9
	default:
		if r := rej(err); r != nil {
			if r.Reason == levee.Throttled {
				w.throttled[b]++
				ct.Throttled++
			} else {
				w.rejected[b]++
				ct.Rejected++
			}
		} else {
			w.failed[b]++
			ct.Failed++
		}
	}
	w.freeCall(c)
}

// ---- load balancers and instances ----

func (t *tierRT) pick() *instance {
	switch t.cfg.LB.Policy {
	case "failover":
		var first *instance
		for _, in := range t.insts {
			if in.crashed {
				continue
			}
			if t.cfg.LB.Saturated <= 0 || in.qn < t.cfg.LB.Saturated {
				return in
			}
			if first == nil {
				first = in
			}
		}
		return first
	case "least_inflight":
		var best *instance
		for _, in := range t.insts {
			if !in.crashed && (best == nil || in.inflight < best.inflight) {
				best = in
			}
		}
		return best
	default:
		n := len(t.insts)
		for k := 0; k < n; k++ {
			t.rr++
			if t.rr >= n {
				t.rr = 0
			}
			if in := t.insts[t.rr]; !in.crashed {
				return in
			}
		}
		return nil
	}
}

func (in *instance) addBusy(d int) {
	now := in.w.now
	in.busyAcc += int64(in.busy) * (now - in.busyT)
	in.busyT = now
	in.busy += d
}

func (w *world) arrive(in *instance, j *job) {
	b := w.bkt(w.now)
	in.recv[b]++
	in.totalRecv++
	if sl := w.now / 1e8; sl != in.recentSlot {
		for k := in.recentSlot + 1; k <= sl && k <= in.recentSlot+10; k++ {
			in.recent[k%10] = 0
		}
		in.recentSlot = sl
	}
	in.recent[in.recentSlot%10]++
	in.tier.recv[b]++
	if in.crashed || w.now < in.failUntil || (in.tier.cfg.Queue > 0 && in.qn >= in.tier.cfg.Queue) {
		c := j.c
		w.freeJob(j)
		w.outcome(c, errRefused)
		return
	}
	if w.memoryGate(in, j) {
		return
	}
	// in-flight list
	j.next = in.head.next
	j.prev = &in.head
	in.head.next.prev = j
	in.head.next = j
	in.inflight++
	if in.inflight > in.peakInflight {
		in.peakInflight = in.inflight
	}
	j.state = jQueued
	if len(in.q) == in.qn {
		in.grow()
	}
	in.q[(in.qh+in.qn)%len(in.q)] = j
	in.qn++
	if lim := in.memLimit(); in.memory() > 1 {
		w.crash(in, fmt.Sprintf("in-flight %d over memory limit %d (queued %d, running %d, waiting on downstream %d); %d attempts arrived in the last second, nominal capacity %.0f/s",
			in.inflight, lim, in.qn, in.busy, in.inflight-in.qn-in.busy, in.lastSecond(), in.nominal()), "memory")
		return
	}
	w.dispatch(in)
}

// lastSecond returns the attempts that arrived in the last second.
func (in *instance) lastSecond() int {
	sl := in.w.now / 1e8
	n := 0
	for k := max(sl-9, 0); k <= sl; k++ {
		if k > in.recentSlot-10 && k <= in.recentSlot {
			n += int(in.recent[k%10])
		}
	}
	return n
}

// nominal is the instance's full-speed capacity in requests per second.
func (in *instance) nominal() float64 { return float64(in.cores) / (in.tier.meanSvc / 1e9) }

func (in *instance) memLimit() int {
	l := in.tier.cfg.MemoryLimit
	if l <= 0 {
		return 0
	}
	return max(1, int(math.Round(float64(l)*in.w.run.MemoryLimitScale)))
}

func (in *instance) grow() {
	n := max(64, 2*len(in.q))
	q := make([]*job, n)
	for i := 0; i < in.qn; i++ {
		q[i] = in.q[(in.qh+i)%len(in.q)]
	}
	in.q = q
	in.qh = 0
}

// pause takes the handler of j (a job waiting on its downstream call) out
// of its instance's concurrency signal while the call waits out a backoff
// — a downstream's pushback, as levee's adapters do it (levee.Pauser):
// the wait is the downstream's request, not a queue in this instance.
// nil or an unprotected job: nothing.
func (w *world) pause(j *job) {
	if j == nil || !j.admitted || j.paused != nil || j.inst.conc == nil {
		return
	}
	j.paused, j.pausedAt = j.inst.conc, w.now
	j.paused.Suspend()
}

// unpause ends j's pause, if any.
func (w *world) unpause(j *job) {
	if j == nil || j.paused == nil {
		return
	}
	j.paused.Resume()
	j.pausedNs += w.now - j.pausedAt
	j.paused = nil
}

// capacity returns the instance's current speed relative to nominal.
func (in *instance) capacity() float64 {
	f := in.capF
	cs := in.tier.cfg.ColdStart
	if cs.Factor < 1 && cs.Duration > 0 && in.upSince > 0 {
		el := float64(in.w.now - in.upSince)
		if d := float64(cs.Duration); el < d {
			f *= cs.Factor + (1-cs.Factor)*el/d
		}
	}
	return f
}

func (w *world) serviceTime(in *instance) int64 {
	d := in.tier.cfg.Service
	mean := in.tier.meanSvc * in.slow / in.capacity()
	var x float64
	switch d.Kind {
	case "const":
		x = mean
	case "lognormal":
		s2 := math.Log(1 + d.CV*d.CV)
		x = mean * math.Exp(math.Sqrt(s2)*in.rng.NormFloat64()-s2/2)
	default:
		x = mean * in.rng.ExpFloat64()
	}
	return max(1, int64(x))
}

// dispatch starts queued jobs on free cores. A protected instance asks
// admit first (this is where a Go handler's middleware runs: after the
// queue); a rejection costs a little CPU.
func (w *world) dispatch(in *instance) {
	for !in.crashed && in.busy < in.cores && in.qn > 0 {
		j := in.q[in.qh]
		in.q[in.qh] = nil
		in.qh++
		if in.qh == len(in.q) {
			in.qh = 0
		}
		in.qn--
		in.qdSum += w.now - j.arrive
		in.qdN++
		if in.qd != nil {
			in.qd.Observe(time.Duration(w.now - j.arrive))
		}
		in.addBusy(1)
		j.state = jRunning
		j.svcStart = w.now
		var d int64
		if in.ctrl != nil {
			t, err := in.ctrl.AdmitAt(&j.ctx, at(w.now))
			if err != nil {
				j.rej = err
				d = max(1, int64(in.tier.meanSvc**in.tier.cfg.RejectCost*in.slow/in.capacity()))
			} else {
				j.ticket = t
				j.admitted = true
				if in.conc != nil {
					// The deadline the tier enforces (admit reads it from
					// the context), as levee's adapters pass it.
					j.start = in.conc.StartAt(at(w.now), time.Duration(max(0, j.deadline-w.now)))
				}
			}
		}
		if j.rej == nil {
			d = w.serviceTime(in)
		}
		w.at(w.now+d, event{kind: evServiceDone, j: j, gen: j.gen})
	}
}

func (w *world) serviceDone(j *job) {
	in := j.inst
	in.addBusy(-1)
	d := w.now - j.svcStart
	j.cpu += d
	w.busyAll += d
	switch {
	case j.rej != nil:
		w.rejectCPU += d
		in.rejected[w.bkt(w.now)]++
		if r := rej(j.rej); r != nil && r.Reason <= levee.Throttled {
			in.byReason[r.Reason]++
		}
		w.respond(j, j.rej)
	case in.downstream != nil && !(j.gone && in.tier.propagate):
		j.state = jDownstream
		c := w.newCall()
		c.from = in.downstream
		c.parent = j
		c.pop = j.pop
		c.crit = j.crit
		c.tenant = j.tenant
		c.start = w.now
		c.deadline = w.now + in.downstream.timeout
		if in.tier.propagate {
			c.deadline = min(c.deadline, j.deadline)
		}
		c.att.Init(in.downstream.policy, at(w.now), at(c.deadline))
		j.child = c
		if c.deadline <= w.now {
			w.finish(c, errTimeout)
		} else {
			w.send(c)
		}
	case j.gone && in.tier.propagate:
		w.respond(j, errCanceled)
	default:
		in.served[w.bkt(w.now)]++
		w.respond(j, nil)
	}
	w.dispatch(in)
}

// respond ends a job at its instance and answers its caller if it is still
// waiting.
func (w *world) respond(j *job, err error) {
	in := j.inst
	if j.state == jDownstream && err == nil {
		in.served[w.bkt(w.now)]++
	}
	j.prev.next = j.next
	j.next.prev = j.prev
	in.inflight--
	if in.ov != nil {
		in.ov.Exit()
	}
	if j.admitted {
		done := err
		if j.gone {
			done = errCanceled
		}
		j.ticket.DoneAt(at(w.now), done)
		w.unpause(j)
		if in.conc != nil {
			in.conc.DoneAt(j.start, at(w.now), time.Duration(j.pausedNs))
		}
	}
	c, gone := j.c, j.gone
	if gone {
		w.wasted += j.cpu
	}
	w.freeJob(j)
	if !gone {
		w.outcome(c, err)
	}
}

// crash takes an instance down: every job in it is lost and its callers
// see a reset.
func (w *world) crash(in *instance, cause, kind string) {
	in.crashes++
	w.crashes = append(w.crashes, report.Crash{
		T:           report.Round(float64(w.now) / 1e9),
		Instance:    in.name,
		Kind:        kind,
		Cause:       cause,
		ArrivalsRPS: in.lastSecond(),
		Inflight:    in.inflight,
	})
	in.addBusy(-in.busy)
	in.crashed = true
	in.restartGen++
	var lost []*job
	for j := in.head.next; j != &in.head; j = j.next {
		lost = append(lost, j)
	}
	in.head.next, in.head.prev = &in.head, &in.head
	for i := range in.q {
		in.q[i] = nil
	}
	in.qh, in.qn, in.inflight = 0, 0, 0
	in.ctrl, in.ov, in.conc = nil, nil, nil
	for _, j := range lost {
		if j.state == jRunning {
			d := w.now - j.svcStart
			j.cpu += d
			w.busyAll += d
		}
		j.gen++ // drops its pending service event
		child := j.child
		j.child = nil
		if child != nil {
			child.parent = nil // the process is gone: nobody to answer
			w.cancelOrphan(child)
		}
		w.wasted += j.cpu
		c, gone := j.c, j.gone
		w.freeJob(j)
		if !gone {
			w.outcome(c, errReset)
		}
	}
	w.at(w.now+int64(in.tier.cfg.Restart), event{kind: evRestart, i: int32(in.gidx), gen: in.restartGen})
}

// cancelOrphan ends a downstream call whose process died: its connection
// closes, so the attempt in flight is abandoned.
func (w *world) cancelOrphan(c *call) {
	if c.cur != nil {
		w.abandon(c.cur)
		c.cur = nil
	}
	c.done = true
	w.freeCall(c)
}

func (w *world) restart(in *instance) {
	in.crashed = false
	in.upSince = w.now
	in.busyT = w.now
	in.tickAcc = in.busyAcc
	in.qdSum, in.qdN, in.strikes = 0, 0, 0
	w.startProcess(in)
}

// unreadCPU is an instance's CPU signal that also reports the requests
// waiting for a core, not yet seen by admission: the demand a real
// process has not read yet, which a Go server's admission reads from its
// scheduler latency signal (pressure.SchedLatency's Unread, a signal the
// simulator leaves out) and its listeners' accept queues
// (leveehttp.Backlog). admit counts its changes as arrivals while
// overloaded, so that a plan is made from the rate requests arrive at,
// not the rate a busy core happens to reach them (one core of
// exponential 1 ms requests at 5×: the admitted share swung 0.07–0.52
// from one period to the next, 0.15–0.16 with it).
type unreadCPU struct {
	*pressure.CPU
	in *instance
}

// Unread returns the instance's queued requests.
func (u unreadCPU) Unread() float64 { return float64(u.in.qn) }

// startProcess gives a (re)started instance fresh process state: its
// admission controller and downstream client.
func (w *world) startProcess(in *instance) {
	t := in.tier
	in.cpu, in.qd, in.conc = nil, nil, nil
	if t.protect {
		// Default's signals for this instance (pressure.Simulated), with
		// the scenario's overrides.
		set, err := pressure.Simulated(
			func() (time.Duration, error) {
				return time.Duration(in.busyAcc + int64(in.busy)*(w.now-in.busyT)), nil
			},
			func() int { return in.cores },
			pressure.WithCPUPeriod(w.s.Levee.Period.D()), pressure.WithCPUTarget(w.s.Levee.CPUTarget))
		if err != nil {
			panic("sim: " + err.Error()) // options validated by Parse
		}
		in.cpu = set.CPU
		sigs := []levee.Signal{unreadCPU{set.CPU, in}}
		if w.s.Levee.QueueDelayTarget >= 0 {
			in.qd = set.Queue
			if w.s.Levee.QueueDelayTarget > 0 {
				in.qd = pressure.NewQueueDelay(pressure.WithQueueTarget(w.s.Levee.QueueDelayTarget.D()))
			}
			sigs = append(sigs, in.qd)
		}
		if c := w.s.Levee.Concurrency; c == nil || *c {
			in.conc = set.Concurrency
			sigs = append(sigs, in.conc)
		}
		in.ctrl = admit.New(
			admit.WithSignals(sigs...),
			admit.WithPeriod(w.s.Levee.Period.D()),
			admit.WithSeed(w.rng.Uint64()),
			admit.WithCores(func() int { return in.cores }),
		)
		in.ov = w.newOverload(in)
	}
	if d := t.cfg.Downstream; d != nil {
		in.downstream = w.newCaller(w.byName[d.Target], &d.Retry, d.Timeout.D(), nil, 0)
	}
}

func (w *world) newCaller(target *tierRT, r *Retry, timeout time.Duration, pop *population, k float64) *caller {
	cl := &caller{target: target, pop: pop}
	scale := 1.0
	if pop != nil {
		scale = w.run.TimeoutScale
	}
	cl.timeout = int64(float64(timeout) * scale)
	cl.attemptTimeout = int64(float64(r.AttemptTimeout) * scale)
	cl.lane = w.laneFor(cl.attemptTimeout)
	seed := w.rng.Uint64()
	src := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if w.levee {
		cl.policy = retry.Policy{
			MaxAttempts: w.s.Levee.Attempts,
			Budget:      retry.NewBudget(),
			Rand:        src.Uint64,
		}
	} else {
		cl.naive = true
		p := retry.Policy{
			MaxAttempts: r.Attempts,
			Base:        max(r.Base.D(), time.Nanosecond),
			Cap:         max(r.Cap.D(), time.Nanosecond),
			Multiplier:  1,
			Jitter:      retry.NoJitter,
			Budget:      retry.Unlimited(),
			Rand:        src.Uint64,
		}
		if r.Backoff == "exponential" {
			p.Multiplier = 2
		}
		if r.Base == 0 {
			p.Base = time.Nanosecond // retry at once
		}
		cl.policy = p
	}
	if w.thr {
		if w.run.ThrottleK > 0 {
			k = w.run.ThrottleK
		}
		if k == 0 {
			k = 2
		}
		cl.thr = throttle.New(throttle.WithK(k))
	}
	return cl
}
