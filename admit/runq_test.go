package admit

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

func newRunQueue(limit int64) *runQueue {
	q := &runQueue{}
	q.init()
	q.limit.Store(limit)
	return q
}

// waitAsync queues a waiter in its own goroutine and returns a channel with
// its result, once it is queued.
func waitAsync(t *testing.T, q *runQueue, ctx context.Context) <-chan [2]bool {
	t.Helper()
	before := q.waiting.Load()
	out := make(chan [2]bool, 1)
	go func() {
		ok, timedOut := q.wait(ctx, time.Now().UnixNano())
		out <- [2]bool{ok, timedOut}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for q.waiting.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("waiter never queued")
		}
		time.Sleep(100 * time.Microsecond)
	}
	return out
}

// assertEmpty checks that no slot is held and nobody waits.
func assertEmpty(t *testing.T, q *runQueue) {
	t.Helper()
	if r, w := q.running.Load(), q.waiting.Load(); r != 0 || w != 0 {
		t.Errorf("running %d, waiting %d, want 0, 0", r, w)
	}
}

func TestRunQueueFIFO(t *testing.T) {
	q := newRunQueue(1)
	if !q.tryFast() {
		t.Fatal("first request did not get the free slot")
	}
	if q.tryFast() {
		t.Fatal("second request got a slot over the bound of 1")
	}
	var outs []<-chan [2]bool
	for range 3 {
		outs = append(outs, waitAsync(t, q, context.Background()))
	}
	for i, out := range outs {
		select {
		case r := <-out:
			t.Fatalf("waiter %d finished (%v) before any release", i, r)
		default:
		}
		q.release()
		r := <-out
		if !r[0] {
			t.Fatalf("waiter %d: %v, want granted", i, r)
		}
		for j := i + 1; j < len(outs); j++ {
			select {
			case r := <-outs[j]:
				t.Fatalf("waiter %d granted (%v) before waiter %d's turn", j, r, i)
			default:
			}
		}
	}
	q.release()
	assertEmpty(t, q)
}

func TestRunQueueCallerGone(t *testing.T) {
	q := newRunQueue(1)
	q.tryFast()
	ctx, cancel := context.WithCancel(context.Background())
	gone := waitAsync(t, q, ctx)
	next := waitAsync(t, q, context.Background())
	cancel()
	if r := <-gone; r != [2]bool{false, false} {
		t.Fatalf("cancelled waiter: %v, want not granted, not expired", r)
	}
	q.release()
	if r := <-next; !r[0] {
		t.Fatalf("the waiter behind a cancelled one: %v, want granted", r)
	}
	q.release()
	assertEmpty(t, q)
}

func TestRunQueueExpire(t *testing.T) {
	q := newRunQueue(1)
	q.tryFast()
	out := waitAsync(t, q, context.Background())
	q.expire(time.Now().UnixNano(), time.Now().Add(-time.Hour).UnixNano(), false) // nothing that old
	select {
	case r := <-out:
		t.Fatalf("waiter ended (%v) by an expiry that did not concern it", r)
	case <-time.After(10 * time.Millisecond):
	}
	q.expire(time.Now().UnixNano(), time.Now().Add(time.Second).UnixNano(), false)
	if r := <-out; r != [2]bool{false, true} {
		t.Fatalf("expired waiter: %v, want not granted, expired", r)
	}
	q.release()
	assertEmpty(t, q)
}

func TestRunQueueRaisedLimitGrants(t *testing.T) {
	q := newRunQueue(1)
	q.tryFast()
	out := waitAsync(t, q, context.Background())
	q.limit.Store(2)
	q.expire(0, 0, false) // what Step does after publishing a limit
	if r := <-out; !r[0] {
		t.Fatalf("waiter after the bound was raised: %v, want granted", r)
	}
}

// TestRunQueueStress: many goroutines through a small bound, with
// cancellations and expiries: the bound holds, every request ends, nothing
// is left running or waiting (run with -race).
func TestRunQueueStress(t *testing.T) {
	const workers, rounds, bound = 16, 300, 3
	q := newRunQueue(bound)
	var cur, peak atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	go func() { // the Step's expiry, now and then
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				q.expire(time.Now().UnixNano(), time.Now().Add(-20*time.Millisecond).UnixNano(), false)
			}
		}
	}()
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				ok := q.tryFast()
				if !ok {
					ctx := context.Background()
					var cancel context.CancelFunc = func() {}
					if (w+i)%5 == 0 {
						ctx, cancel = context.WithTimeout(ctx, 50*time.Microsecond)
					}
					ok, _ = q.wait(ctx, time.Now().UnixNano())
					cancel()
				}
				if !ok {
					continue
				}
				n := cur.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(20 * time.Microsecond)
				cur.Add(-1)
				q.release()
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("stuck: running %d, waiting %d", q.running.Load(), q.waiting.Load())
	}
	close(stop)
	if p := peak.Load(); p > bound {
		t.Errorf("%d requests ran at once, bound %d", p, bound)
	}
	assertEmpty(t, q)
}

// holdTickets admits n tickets and holds their run slots.
func holdTickets(t *testing.T, c *Controller, n int) []Ticket {
	t.Helper()
	ts := make([]Ticket, n)
	for i := range ts {
		var err error
		ts[i], err = c.Admit(context.Background())
		if err == nil {
			err = ts[i].Wait(context.Background())
		}
		if err != nil {
			t.Fatalf("ticket %d: %v", i, err)
		}
	}
	return ts
}

type constSignal struct{ v, target float64 }

func (s *constSignal) Name() string     { return "cpu" }
func (s *constSignal) Value() float64   { return s.v }
func (s *constSignal) Target() float64  { return s.target }
func (c *Controller) runBound() float64 { return float64(c.runq.limit.Load()) }

// TestRunLimitLearned: the bound is twice what runs at once while busy but
// not overloaded (degraded included: the level rises below target),
// scaled to the load at target, and never below the floor.
func TestRunLimitLearned(t *testing.T) {
	for _, load := range []float64{0.6, 0.9} {
		sig := &constSignal{v: 0.8 * load, target: 0.8}
		c, clk := withFakeClock(WithSignals(sig))
		t0 := c.timeAt(clk.now())
		if c.runq.on() {
			t.Fatal("run queue on before the first Step")
		}
		c.Step(t0)
		if b := c.runBound(); b != runCount {
			t.Fatalf("load %v: bound before anything was learned: %v, want counting without a bound", load, b)
		}
		ts := holdTickets(t, c, 20)
		for i := 1; i <= 200; i++ { // 10 s: the 2 s smoothing has converged
			c.Step(t0.Add(time.Duration(i) * c.cfg.period))
		}
		if load == 0.9 && c.Degrade().Level() == 0 {
			t.Fatalf("load 0.9: degradation level 0; the case needs it up")
		}
		want := 2 * 20 / load
		if b := c.runBound(); b < want-3 || b > want+3 {
			t.Errorf("load %v: bound %v with 20 running, want ≈ %.0f", load, b, want)
		}
		for i := range ts {
			ts[i].Done(nil)
		}
		for i := 201; i <= 400; i++ {
			c.Step(t0.Add(time.Duration(i) * c.cfg.period))
		}
		if b, floor := c.runBound(), c.run.floor; b != floor {
			t.Errorf("load %v: bound %v with nothing running, want the floor %v", load, b, floor)
		}
	}
}

// TestRunQueueOffWhenIdle: below half the targets, with nothing shed, the
// run queue is off: a ticket takes no slot and nothing is counted.
func TestRunQueueOffWhenIdle(t *testing.T) {
	sig := &constSignal{v: 0.48, target: 0.8}
	c, clk := withFakeClock(WithSignals(sig))
	t0 := c.timeAt(clk.now())
	c.Step(t0)
	busy := holdTickets(t, c, 3)
	if r := c.runq.running.Load(); r != 3 {
		t.Fatalf("busy: %d slots held by 3 tickets, want 3", r)
	}
	sig.v = 0.2 // load 0.25
	c.Step(t0.Add(c.cfg.period))
	if c.runq.on() {
		t.Fatal("run queue on at load 0.25")
	}
	idle := holdTickets(t, c, 3)
	if r := c.runq.running.Load(); r != 3 {
		t.Errorf("idle: %d slots held, want still the 3 busy ones", r)
	}
	for i := range busy {
		busy[i].Done(nil)
		idle[i].Done(nil)
	}
	if r := c.runq.running.Load(); r != 0 {
		t.Errorf("%d slots held after every ticket is done, want 0", r)
	}
}

// TestRunLimitGrowsWithRoom: requests waiting while the signals have room
// mean the bound, not the server, is the bottleneck (a slower dependency
// needs more requests in flight): it grows by a quarter a period.
func TestRunLimitGrowsWithRoom(t *testing.T) {
	sig := &constSignal{v: 0.48, target: 0.8} // load 0.6 < 0.8
	c, clk := withFakeClock(WithSignals(sig), WithRunQueue(time.Hour))
	t0 := c.timeAt(clk.now())
	c.Step(t0)
	ts := holdTickets(t, c, 2)
	for i := 1; i <= 100; i++ {
		c.Step(t0.Add(time.Duration(i) * c.cfg.period))
	}
	bound := int(c.runBound())
	if bound < 4 || bound > 10 {
		t.Fatalf("bound %d with 2 running at load 0.6, want ≈ 7", bound)
	}
	ts = append(ts, holdTickets(t, c, bound-len(ts))...)
	extra, err := c.Admit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- extra.Wait(context.Background()) }()
	for c.runq.waiting.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	c.Step(t0.Add(101 * c.cfg.period))
	if err := <-got; err != nil {
		t.Fatalf("waiter after the bound grew: %v", err)
	}
	if b := int(c.runBound()); b <= bound {
		t.Errorf("bound %d after a period with a waiter and load 0.6, want above %d", b, bound)
	}
	extra.Done(nil)
	for i := range ts {
		ts[i].Done(nil)
	}
}

func TestTicketWaitRejections(t *testing.T) {
	c, clk := withFakeClock(WithRunQueue(time.Second))
	c.runq.limit.Store(1)
	held := holdTickets(t, c, 1)

	// Caller gone while waiting: Deadline, counted.
	tk, _ := c.Admit(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	err := tk.Wait(ctx)
	var rej *levee.RejectedError
	if !errors.As(err, &rej) || rej.Reason != levee.Deadline {
		t.Fatalf("waiter whose deadline passed: %v, want a Deadline rejection", err)
	}
	tk.Done(nil) // no-op
	if s := c.Snapshot(); s.Rejected[levee.Critical][levee.Deadline] != 1 {
		t.Errorf("deadline rejections counted %d, want 1", s.Rejected[levee.Critical][levee.Deadline])
	}

	// Waited longer than the run queue allows: Overloaded.
	tk2, _ := c.Admit(levee.WithCriticality(context.Background(), levee.Sheddable))
	got := make(chan error, 1)
	go func() { got <- tk2.Wait(context.Background()) }()
	for c.runq.waiting.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	clk.advance(2 * time.Second)
	c.stepReal(clk.now(), false)
	err = <-got
	if !errors.As(err, &rej) || rej.Reason != levee.Overloaded {
		t.Fatalf("waiter past the longest wait: %v, want an Overloaded rejection", err)
	}
	if s := c.Snapshot(); s.Rejected[levee.Sheddable][levee.Overloaded] != 1 || s.Shed[levee.Sheddable][StageRunQueue] != 1 {
		t.Errorf("overload rejections counted %d, by the run queue %d, want 1 and 1", s.Rejected[levee.Sheddable][levee.Overloaded], s.Shed[levee.Sheddable][StageRunQueue])
	}
	held[0].Done(nil)
	held[0].Done(nil) // idempotent: the slot is freed once
	if r := c.runq.running.Load(); r != 0 {
		t.Errorf("running %d after every ticket is done, want 0", r)
	}
}

func TestWaitFastPathDoesNotAllocate(t *testing.T) {
	c, _ := withFakeClock(WithRunQueue(time.Second))
	c.runq.limit.Store(4) // bounded, with room
	ctx := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Critical, Tenant: "t"})
	got := testing.AllocsPerRun(1000, func() {
		tk, err := c.Admit(ctx)
		if err == nil {
			err = tk.Wait(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(nil)
	})
	if got != 0 {
		t.Errorf("%v allocs per Admit+Wait+Done under a bound, want 0", got)
	}
}

func TestRunQueueOff(t *testing.T) {
	c, _ := withFakeClock(WithRunQueue(0))
	c.runq.limit.Store(0) // would block everything if it applied
	tk, _ := c.Admit(context.Background())
	if err := tk.Wait(context.Background()); err != nil {
		t.Fatalf("Wait with the run queue off: %v", err)
	}
	tk.Done(nil)
}

func TestRunBoundFixed(t *testing.T) {
	c, clk := withFakeClock(WithRunBound(2)) // no signals: never busy, yet bounded
	held := holdTickets(t, c, 2)
	c.stepReal(clk.now(), false)
	if b := c.runBound(); b != 2 {
		t.Fatalf("bound %v, want the fixed 2", b)
	}
	tk, _ := c.Admit(context.Background())
	got := make(chan error, 1)
	go func() { got <- tk.Wait(context.Background()) }()
	for c.runq.waiting.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	held[0].Done(nil)
	if err := <-got; err != nil {
		t.Fatalf("waiter after a slot freed: %v", err)
	}
	tk.Done(nil)
	held[1].Done(nil)
	if r := c.runq.running.Load(); r != 0 {
		t.Errorf("running %d after every ticket is done, want 0", r)
	}
}

func TestStandingStep(t *testing.T) {
	ms := int64(time.Millisecond)
	tests := []struct {
		name     string
		oldest   []int64 // ns waited by the oldest waiter, Step after Step
		burst    []bool  // a signal says the queue absorbs a burst, Step after Step; nil: never
		wantLIFO bool
		wantWait time.Duration
	}{
		{"empty queue", []int64{0, 0, 0}, nil, false, DefaultRunWait},
		{"one old wait is a burst", []int64{0, 50 * ms}, nil, false, DefaultRunWait},
		{"two in a row: standing", []int64{50 * ms, 50 * ms}, nil, true, runShortWait},
		{"drained: FIFO again", []int64{50 * ms, 50 * ms, 2 * ms}, nil, false, DefaultRunWait},
		{"short waits never stand", []int64{5 * ms, 5 * ms, 5 * ms}, nil, false, DefaultRunWait},
		{"a signal's burst keeps it FIFO", []int64{50 * ms, 50 * ms, 50 * ms}, []bool{true, true, true}, false, DefaultRunWait},
		{"the burst over, a standing queue is cut at once", []int64{50 * ms, 50 * ms, 50 * ms}, []bool{true, true, false}, true, runShortWait},
	}
	for _, tt := range tests {
		var s standing
		var lifo bool
		var wait time.Duration
		for i, o := range tt.oldest {
			s.oldest = o
			lifo, wait = s.step(DefaultRunWait, tt.burst != nil && tt.burst[i])
		}
		if lifo != tt.wantLIFO || wait != tt.wantWait {
			t.Errorf("%s: lifo %v wait %v, want %v %v", tt.name, lifo, wait, tt.wantLIFO, tt.wantWait)
		}
	}
}

// TestRunQueueStandingServesNewest: a run queue that stands (its oldest
// waiter older than 10 ms at two Steps in a row) serves the newest waiter
// first and lets a wait last 100 ms, not 500: long requests' standing
// wait stays short.
func TestRunQueueStandingServesNewest(t *testing.T) {
	c, clk := withFakeClock(WithRunBound(1))
	c.pretendRunning(true) // as under Run: Steps come from the test only
	held := holdTickets(t, c, 1)
	done := make(chan waiterResult, 8)
	wait := func(i int) { startWaiter(t, c, clk, i, done) }
	overloaded := func(r waiterResult) bool {
		re := levee.AsRejected(r.err)
		return re != nil && re.Reason == levee.Overloaded
	}
	for i := range 4 { // four waiters, 20 ms apart: t = 0, 20, 40, 60 ms
		wait(i)
		clk.advance(20 * time.Millisecond)
	}
	// Steps at 80 and 100 ms find the oldest waiting 80 ms: still the
	// 500 ms limit, FIFO. The Step at 120 ms sees it standing twice: from
	// then on a wait lasts 100 ms, and waiter 0 (120 ms) is rejected.
	c.stepReal(clk.now(), false)
	clk.advance(20 * time.Millisecond)
	c.stepReal(clk.now(), false)
	select {
	case r := <-done:
		t.Fatalf("waiter %d left (%v) before the queue stood", r.i, r.err)
	default:
	}
	clk.advance(20 * time.Millisecond)
	c.stepReal(clk.now(), false)
	if r := <-done; r.i != 0 || !overloaded(r) {
		t.Fatalf("waiter %d: %v; want waiter 0 rejected as Overloaded after 100 ms of a standing queue", r.i, r.err)
	}
	wait(4) // the newest, at 120 ms
	held[0].Done(nil)
	first := <-done
	if first.i != 4 || first.err != nil {
		t.Fatalf("first served: waiter %d (%v), want the newest, 4", first.i, first.err)
	}
	// 100 ms on, the waiters left (1–3) have waited too long.
	clk.advance(100 * time.Millisecond)
	c.stepReal(clk.now(), false)
	for range 3 {
		if r := <-done; !overloaded(r) {
			t.Errorf("waiter %d: %v, want rejected as Overloaded", r.i, r.err)
		}
	}
	first.tk.Done(nil)
	assertEmpty(t, &c.runq)
}

// TestTicketWaitDryRun: in dry-run the run queue bounds and orders every
// request, those Admit would have rejected included, and never ends a
// wait in a rejection: the bound's expiry leaves waiters waiting, a wait
// ends in a slot, or in a Deadline error when its caller has gone
// (counted as a caller gone, not as a would-be rejection: live, the
// queue would not have held the requests it waited behind).
func TestTicketWaitDryRun(t *testing.T) {
	c, clk := withFakeClock(WithRunQueue(time.Second), WithRunBound(1), WithDryRun(true), WithQuota("q", Quota{Rate: 1, Burst: 1}),
		WithLogger(slog.New(slog.DiscardHandler)))
	held := holdTickets(t, c, 1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	gone, _ := c.Admit(context.Background())
	if err := gone.Wait(ctx); !errors.Is(err, levee.ErrDeadline) {
		t.Fatalf("dry-run, caller gone while waiting: %v, want a Deadline error", err)
	}

	quota := levee.WithCall(context.Background(), levee.Call{Tenant: "q"})
	q1, _ := c.Admit(quota)
	q1.Done(nil) // its token
	over, err := c.Admit(quota)
	if err != nil {
		t.Fatalf("dry-run, over quota: %v, want admitted", err)
	}
	got := make(chan error, 1)
	go func() { got <- over.Wait(context.Background()) }()
	for c.runq.waiting.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}
	clk.advance(2 * time.Second) // past the longest wait
	c.stepReal(clk.now(), false)
	select {
	case err := <-got:
		t.Fatalf("dry-run: a wait ended (%v) with no slot free, want it to go on", err)
	case <-time.After(20 * time.Millisecond):
	}
	held[0].Done(nil)
	if err := <-got; err != nil {
		t.Fatalf("dry-run, a slot freed: %v, want nil", err)
	}

	s := c.Snapshot()
	want := [levee.NumCriticalities][levee.NumReasons]uint64{}
	want[levee.Critical][levee.Quota] = 1
	if s.WouldReject != want || sumRejected(s) != 0 || s.CallerGone != 1 {
		t.Errorf("would reject %v, rejected %v, caller gone %d; want %v, none and 1", s.WouldReject, s.Rejected, s.CallerGone, want)
	}
	over.Done(nil)
	if r := c.runq.running.Load(); r != 0 {
		t.Errorf("running %d after every ticket is done, want 0", r)
	}
}

func sumRejected(s Snapshot) (n uint64) {
	for _, by := range s.Rejected {
		for _, v := range by {
			n += v
		}
	}
	return n
}

// TestRunBoundFromSoloTime: once the capacity and the service time of
// requests that ran alone are known, and requests are long enough for Go
// to time-slice them, the bound is what the capacity needs running at
// once, not twice what ran at once while busy: on one core, CPU-bound
// 20 ms handlers held twenty at a time would learn a bound of about 67
// (each request then sharing the core with dozens). Requests of 2 ms run
// to completion once scheduled, and keep the running count's bound.
func TestRunBoundFromSoloTime(t *testing.T) {
	for _, d := range []time.Duration{20 * time.Millisecond, 2 * time.Millisecond} {
		sig := &constSignal{v: 0.4 * 0.8, target: 0.8}
		c, clk := withFakeClock(WithSignals(sig))
		c.run.procs = 1 // a one-core server, whatever runs the test
		c.Step(c.timeAt(clk.now()))
		// One request at a time for 40 s, busy 40% of the time, at load
		// 0.4: the server is not busy (the run queue is off), and every
		// measured ticket (one in 64) ran alone.
		for i := 0; i < int(40*time.Second/(d*5/2)); i++ {
			tk, err := c.Admit(context.Background())
			if err == nil {
				err = tk.Wait(context.Background())
			}
			if err != nil {
				t.Fatalf("%v: request %d: %v", d, i, err)
			}
			clk.advance(d)
			tk.Done(nil)
			clk.advance(d * 3 / 2)
		}
		if got := c.solo.seconds(); math.Abs(got-d.Seconds()) > 0.025*d.Seconds() {
			t.Fatalf("%v: solo service time %.4fs", d, got)
		}
		if c.law.capEst <= 0 {
			t.Fatalf("%v: no capacity estimate learned", d)
		}
		// Now busy (load 0.6), twenty run at once for 10 s.
		sig.v = 0.6 * 0.8
		clk.advance(c.cfg.period)
		c.Step(c.timeAt(clk.now()))
		ts := holdTickets(t, c, 20)
		for i := 0; i < 200; i++ {
			clk.advance(c.cfg.period)
			c.Step(c.timeAt(clk.now()))
		}
		need := c.law.capEst * c.solo.seconds()
		t.Logf("%v: capacity %.1f/s, solo %.4fs, need %.2f, bound %v (the running count's: %.0f)", d, c.law.capEst, c.solo.seconds(), need, c.runBound(), c.run.limit)
		if old := c.run.limit; old < 30 {
			t.Errorf("%v: the running count's bound is %.0f; the case needs it well above the need's", d, old)
		}
		want := math.Ceil(c.run.limit)
		if d > goSlice {
			want = math.Round(max(1, 2*need))
		}
		if b := c.runBound(); b != want {
			t.Errorf("%v: bound %v with capacity %.1f/s (need %.2f), want %v", d, b, c.law.capEst, need, want)
		}
		for i := range ts {
			ts[i].Done(nil)
		}
	}
}

// TestSoloTime: the solo service time follows the median of its samples
// 5% a sample, one sample cannot move it further, and it is not used
// before soloSamples samples.
func TestSoloTime(t *testing.T) {
	var s soloTime
	for i := 0; i < soloSamples-1; i++ {
		s.observe(int64(10 * time.Millisecond))
	}
	if got := s.seconds(); got != 0 {
		t.Fatalf("after %d samples: %v, want 0 (not yet used)", soloSamples-1, got)
	}
	s.observe(int64(10 * time.Millisecond))
	if got := s.seconds(); math.Abs(got-0.010) > 1e-6 {
		t.Fatalf("after %d samples of 10 ms: %v", soloSamples, got)
	}
	// One sample of an hour (a long-poll that was not excluded) moves it
	// 5% at most.
	s.observe(int64(time.Hour))
	if got, most := s.seconds(), 0.010*soloUp; got > most+1e-9 {
		t.Fatalf("after a 1 h sample: %v, want ≤ %v", got, most)
	}
	s.observe(-1)
	s.observe(maxService + 1)
	// A crowded minority does not pull it: one sample in four at 100 ms
	// among 20 ms ones.
	for i := 0; i < 400; i++ {
		d := 20 * time.Millisecond
		if i%4 == 0 {
			d = 100 * time.Millisecond
		}
		s.observe(int64(d))
	}
	if got := s.seconds(); got < 0.020/soloUp || got > 0.020*soloUp*soloUp {
		t.Fatalf("20 ms with one sample in four at 100 ms: %v", got)
	}
	// It follows a change: 5 ms samples bring it there.
	for i := 0; i < 200; i++ {
		s.observe(int64(5 * time.Millisecond))
	}
	if got := s.seconds(); math.Abs(got-0.005) > 0.005*(soloUp-1) {
		t.Fatalf("after 200 samples of 5 ms: %v", got)
	}
}

// TestWithCores: the cores are read every period (Go moves GOMAXPROCS
// with a container's CPU limit; a simulated instance has its own), and
// the run queue's floor and the unread threshold follow them.
func TestWithCores(t *testing.T) {
	n := 2
	c := New(WithCores(func() int { return n }))
	if c.run.procs != 2 || c.run.floor != 4 {
		t.Fatalf("cores 2: procs %v, floor %v; want 2, 4", c.run.procs, c.run.floor)
	}
	at := time.Unix(1_700_000_000, 0)
	n = 16
	c.Step(at.Add(DefaultPeriod))
	if c.run.procs != 16 || c.run.floor != 32 {
		t.Errorf("cores 16 after a Step: procs %v, floor %v; want 16, 32", c.run.procs, c.run.floor)
	}
	n = 0 // nonsense reads as one core
	c.Step(at.Add(2 * DefaultPeriod))
	if c.run.procs != 1 || c.run.floor != 4 {
		t.Errorf("cores 0: procs %v, floor %v; want 1, 4", c.run.procs, c.run.floor)
	}
	if d := New(WithCores(nil)); d.run.procs != float64(runtime.GOMAXPROCS(0)) {
		t.Errorf("WithCores(nil): procs %v; want GOMAXPROCS %d", d.run.procs, runtime.GOMAXPROCS(0))
	}
}

// waiterResult is how a run-queue waiter's wait ended (startWaiter).
type waiterResult struct {
	i   int
	err error
	tk  *Ticket
}

// startWaiter admits request i at the fake clock's time and waits on its
// ticket in a goroutine that reports to done (a granted slot is held until
// the test ends it); it returns once the request waits in the run queue.
func startWaiter(t *testing.T, c *Controller, clk *fakeClock, i int, done chan<- waiterResult) {
	t.Helper()
	c.clock.Store(clk.now())
	tk, err := c.Admit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := c.runq.waiting.Load()
	go func() {
		err := tk.Wait(context.Background())
		done <- waiterResult{i, err, &tk}
	}()
	for c.runq.waiting.Load() == n {
		time.Sleep(50 * time.Microsecond)
	}
}

// burstingSignal is a quiet signal that reports a burst being absorbed
// (signals.go's burster) as the test says.
type burstingSignal struct {
	constSignal
	on atomic.Bool
}

func (s *burstingSignal) Name() string   { return "queue_delay" }
func (s *burstingSignal) Bursting() bool { return s.on.Load() }

// TestRunQueueBurstStaysFIFO: while a signal says the queue is a burst it
// absorbs (pressure.QueueDelay within its burst allowance), the run
// queue keeps first-come first-served order and its configured wait: the
// standing rule would cut the burst's waits at 100 ms and refuse the
// requests the signal holds to fit. Once the burst ends, the rule holds
// again.
func TestRunQueueBurstStaysFIFO(t *testing.T) {
	sig := &burstingSignal{constSignal: constSignal{v: 0, target: 1}}
	sig.on.Store(true)
	c, clk := withFakeClock(WithRunBound(1), WithSignals(sig))
	c.pretendRunning(true)
	held := holdTickets(t, c, 1)
	done := make(chan waiterResult, 8)
	for i := range 4 { // four waiters, 40 ms apart
		startWaiter(t, c, clk, i, done)
		clk.advance(40 * time.Millisecond)
		c.stepReal(clk.now(), false)
	}
	// The oldest has waited 160 ms, standing at four Steps: a burst, so
	// nobody was refused.
	select {
	case r := <-done:
		t.Fatalf("waiter %d left (%v) during a burst", r.i, r.err)
	default:
	}
	for i := range 4 {
		if i == 0 {
			held[0].Done(nil)
		}
		r := <-done
		if r.i != i || r.err != nil {
			t.Fatalf("served %d (%v), want waiter %d: first come, first served", r.i, r.err, i)
		}
		r.tk.Done(nil)
	}
	assertEmpty(t, &c.runq)

	// The same queue once the burst is over: standing, the oldest waiter
	// is refused after 100 ms.
	sig.on.Store(false)
	held = holdTickets(t, c, 1)
	startWaiter(t, c, clk, 0, done)
	for range 4 {
		clk.advance(40 * time.Millisecond)
		c.stepReal(clk.now(), false)
	}
	if re := levee.AsRejected((<-done).err); re == nil || re.Reason != levee.Overloaded {
		t.Errorf("a standing queue without a burst: %v; want the wait rejected as Overloaded", re)
	}
	held[0].Done(nil)
	assertEmpty(t, &c.runq)
}
