package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/pressure"
)

// The simulator's tiers release their cores while a downstream call is in
// flight and have no connection pool, so a handler that waits on a pool
// of connections to a slow dependency — issue 16's case the CPU does not
// see — is modelled here on its own: levee's real admission controller and
// Default's signals (pressure.Simulated) on virtual time, in front of a
// handler that spends cpu and then waits, in order, for one of pool
// connections to a dependency that answers in dep(t) ±20%. Naive clients
// send offered requests a second, each attempt with a 1 s deadline, and
// retry a rejected or timed-out attempt at once, twice. The handler never
// looks at its deadline: work for a caller that has gone is done anyway.
type poolPlant struct {
	rng  *rand.Rand
	now  time.Duration
	ctrl *admit.Controller
	set  *pressure.Set

	capSlow float64 // the concurrency signal's Capacity in the slow phase

	cpu     time.Duration
	pool    int
	dep     func(t time.Duration) time.Duration
	offered float64

	busy    time.Duration // the handler's cumulative CPU
	free    int
	queue   []*poolJob // waiting for a connection
	held    []*poolJob // holding one
	pending []*poolJob // admitted, in the order of their deadlines
	retry   []poolAttempt

	secs []poolSecond
}

type poolAttempt struct {
	sent     time.Duration // of the logical request
	attempts int
}

type poolJob struct {
	a        poolAttempt
	deadline time.Duration // of this attempt
	started  time.Duration
	ticket   admit.Ticket
	st       pressure.Start
	done     time.Duration // when the connection is released
	ended    bool
}

type poolSecond struct {
	offered, good, late, runs, rejected int
	lat                                 []time.Duration // of the good ones, from the first attempt
}

// vctx is a request context on virtual time: a deadline (none when zero)
// and nothing else.
type vctx struct{ deadline time.Time }

func (c vctx) Deadline() (time.Time, bool) { return c.deadline, !c.deadline.IsZero() }
func (c vctx) Done() <-chan struct{}       { return nil }
func (c vctx) Err() error                  { return nil }
func (c vctx) Value(any) any               { return nil }

const poolStep = 100 * time.Microsecond

// newPoolPlant returns the plant with Default's signals, or without the
// concurrency signal (the set before it existed) when blind.
func newPoolPlant(seed uint64, blind bool) *poolPlant {
	p := &poolPlant{rng: rand.New(rand.NewPCG(seed, 11)), cpu: 200 * time.Microsecond, pool: 8, offered: 0.7 * 1600}
	p.free = p.pool
	set, err := pressure.Simulated(func() (time.Duration, error) { return p.busy, nil }, func() int { return 1 })
	if err != nil {
		panic(err)
	}
	p.set = set
	signals := set.Signals()
	if blind {
		signals = []levee.Signal{set.CPU, set.Queue}
	}
	p.ctrl = admit.New(admit.WithSignals(signals...), admit.WithRunQueue(0), admit.WithSeed(seed))
	return p
}

func (p *poolPlant) sec() *poolSecond {
	i := int(p.now / time.Second)
	for len(p.secs) <= i {
		p.secs = append(p.secs, poolSecond{})
	}
	return &p.secs[i]
}

func (p *poolPlant) run(d time.Duration) {
	for end := p.now + d; p.now < end; {
		p.now += poolStep
		now := at(int64(p.now))
		p.release(now)
		n := p.arrivals()
		attempts := p.retry
		p.retry = nil
		for range n {
			p.sec().offered++
			attempts = append(attempts, poolAttempt{sent: p.now})
		}
		for _, a := range attempts {
			p.send(a, now)
		}
		for p.free > 0 && len(p.queue) > 0 {
			j := p.queue[0]
			p.queue = p.queue[1:]
			p.free--
			j.done = p.now + time.Duration(float64(p.dep(p.now))*(0.8+0.4*p.rng.Float64()))
			p.held = append(p.held, j)
		}
		if p.now%(50*time.Millisecond) == 0 {
			p.set.SampleAt(now)
			p.ctrl.Step(now)
			if p.now == 20*time.Second {
				p.capSlow = p.set.Concurrency.Capacity()
			}
		}
	}
}

func (p *poolPlant) arrivals() int {
	lam := p.offered * poolStep.Seconds()
	l, k, x := math.Exp(-lam), 0, 1.0
	for {
		if x *= p.rng.Float64(); x <= l {
			return k
		}
		k++
	}
}

// send makes one attempt: admission, then the handler's CPU and its place
// in the pool's queue.
func (p *poolPlant) send(a poolAttempt, now time.Time) {
	a.attempts++
	j := &poolJob{a: a, deadline: p.now + time.Second, started: p.now}
	p.set.Queue.Observe(0)
	t, err := p.ctrl.AdmitAt(vctx{at(int64(j.deadline))}, now)
	if err != nil {
		p.sec().rejected++
		p.again(a)
		return
	}
	j.ticket = t
	j.st = p.set.Concurrency.StartAt(now, time.Second)
	p.busy += p.cpu
	p.queue = append(p.queue, j)
	p.pending = append(p.pending, j)
}

func (p *poolPlant) again(a poolAttempt) {
	if a.attempts < 3 {
		p.retry = append(p.retry, a)
	}
}

func (p *poolPlant) release(now time.Time) {
	kept := p.held[:0]
	for _, j := range p.held {
		if p.now < j.done {
			kept = append(kept, j)
			continue
		}
		p.free++
		j.ended = true
		j.ticket.DoneAt(now, nil)
		p.set.Concurrency.DoneAt(j.st, now, 0)
		s := p.sec()
		s.runs++
		if p.now > j.deadline {
			s.late++ // its caller gave up and already retried (see below)
			continue
		}
		s.good++
		s.lat = append(s.lat, p.now-j.a.sent)
	}
	p.held = kept
	// Callers whose attempt's deadline passed retry at once, naively.
	for len(p.pending) > 0 && p.pending[0].deadline <= p.now {
		if j := p.pending[0]; !j.ended {
			p.again(j.a)
		}
		p.pending = p.pending[1:]
	}
}

func (p *poolPlant) totals(from, to int) (good, late, runs int, p99 time.Duration) {
	var lat []time.Duration
	for i := from; i < to && i < len(p.secs); i++ {
		good += p.secs[i].good
		late += p.secs[i].late
		runs += p.secs[i].runs
		lat = append(lat, p.secs[i].lat...)
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		p99 = lat[len(lat)*99/100]
	}
	return good, late, runs, p99
}

// TestPoolDependency: a dependency behind a pool of 8 connections slows
// from 5 ms to 50 ms for 20 s at a constant 0.7 of what the pool serves
// at 5 ms (issue 16's slow-dependency shape, on virtual time; every
// attempt's 1 s deadline given to admission). levee must see it although
// the CPU stays low, serve ≥ 0.9 of the pool's 160/s over the slow phase
// with ≤ 5% of handler runs late (its first cut aims at what the pool
// completes, not at the capacity the CPU-bound periods before implied:
// before, 0.86 and 13–14% late, all from the pile the first seconds
// admitted), and serve everything again within 2 s of the recovery. Without the
// concurrency signal it sees nothing: the pile grows to the clients'
// retries, every run ends after its caller has gone, and nothing is
// served even after the dependency recovered.
func TestPoolDependency(t *testing.T) {
	if testing.Short() {
		t.Skip("40 s of virtual time per run")
	}
	dep := func(t time.Duration) time.Duration {
		if t >= 10*time.Second && t < 30*time.Second {
			return 50 * time.Millisecond
		}
		return 5 * time.Millisecond
	}
	for seed := uint64(1); seed <= 3; seed++ {
		p := newPoolPlant(seed, false)
		p.dep = dep
		p.run(40 * time.Second)
		before, _, _, _ := p.totals(2, 10)
		slow, late, runs, p99 := p.totals(10, 30)
		settled, lateSettled, runsSettled, _ := p.totals(14, 30)
		after, _, _, _ := p.totals(32, 40)
		t.Logf("seed %d: %.0f/s before; slow phase %.0f/s (%.2f of 160/s, p99 from the first attempt %v, %.1f%% of %d runs late), from its 4th second %.2f of 160/s with %d late; %.0f/s from 2 s after the recovery",
			seed, float64(before)/8, float64(slow)/20, float64(slow)/20/160, p99, 100*float64(late)/float64(max(runs, 1)), runs,
			float64(settled)/16/160, lateSettled, float64(after)/8)
		if got := float64(before) / 8; got < 0.98*p.offered {
			t.Errorf("seed %d: %.0f/s before the slowdown; want all of %.0f", seed, got, p.offered)
		}
		if got := float64(slow) / 20 / 160; got < 0.9 || late > runs/20 {
			t.Errorf("seed %d: %.2f of the pool's capacity served over the slow phase, %d of %d runs late; want ≥ 0.9 and ≤ 5%%", seed, got, late, runs)
		}
		if got := float64(settled) / 16 / 160; got < 0.95 || lateSettled > runsSettled/100 {
			t.Errorf("seed %d: from the 4th second of the slowdown %.2f of the pool's capacity served, %d of %d runs late; want ≥ 0.95 and ≤ 1%%",
				seed, got, lateSettled, runsSettled)
		}
		if got := float64(after) / 8; got < 0.95*p.offered {
			t.Errorf("seed %d: %.0f/s from 2 s after the recovery; want ≥ 0.95 of %.0f", seed, got, p.offered)
		}
		if c := p.capSlow; c < 140 || c > 180 {
			t.Errorf("seed %d: the concurrency signal's capacity read %.0f/s in the slow phase; want about the pool's 160/s", seed, c)
		}
	}
	p := newPoolPlant(1, true)
	p.dep = dep
	p.run(40 * time.Second)
	slow, late, runs, _ := p.totals(10, 30)
	after, _, _, _ := p.totals(32, 40)
	t.Logf("without the concurrency signal: %.2f of 160/s while slow, %.0f%% of runs late, %.0f/s after the recovery", float64(slow)/20/160, 100*float64(late)/float64(max(runs, 1)), float64(after)/8)
	if float64(slow)/20/160 > 0.5 || float64(after)/8 > 0.5*p.offered {
		t.Errorf("without the concurrency signal the plant served %.2f of the pool while slow and %.0f/s after; this check no longer shows what the signal adds", float64(slow)/20/160, float64(after)/8)
	}
}

func sum(xs []uint64) (n uint64) {
	for _, x := range xs {
		n += x
	}
	return n
}

var _ context.Context = vctx{}
