package pressure

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestConcurrencyRequestPath(t *testing.T) {
	c := NewConcurrency()
	now := t0
	a := c.StartAt(now, 0)
	b := c.StartAt(now, 300*time.Millisecond)
	d := c.StartAt(now, 0)
	if got := c.InFlight(); got != 3 {
		t.Fatalf("InFlight = %d after three starts; want 3", got)
	}
	c.Suspend()
	if got := c.InFlight(); got != 2 {
		t.Errorf("InFlight = %d while one is suspended; want 2", got)
	}
	c.Resume()
	c.DoneAt(a, now.Add(10*time.Millisecond), 0)
	c.DoneAt(b, now.Add(30*time.Millisecond), 20*time.Millisecond) // 10 ms of service
	c.Drop(d)
	c.DoneAt(Start{}, now, 0) // the zero Start counts nothing
	c.Drop(Start{})
	if got := c.InFlight(); got != 0 {
		t.Errorf("InFlight = %d after every request ended; want 0", got)
	}
	var n, ns int64
	for i := range c.ended {
		n += c.ended[i].n.Load()
		ns += c.ended[i].ns.Load()
	}
	if n != 2 || time.Duration(ns) != 20*time.Millisecond {
		t.Errorf("ended %d requests, %v of service; want 2 and 20ms (the dropped one and the excluded time left out)", n, time.Duration(ns))
	}
	if got := c.budgets[budgetBucket(300*time.Millisecond)].Load(); got != 1 {
		t.Errorf("budget bucket of 300ms holds %d; want 1", got)
	}
	// A clock that went backwards gives no sample but still ends the request.
	e := c.StartAt(now, 0)
	c.DoneAt(e, now.Add(-time.Second), 0)
	if c.InFlight() != 0 || c.ended[kBucket(1)].n.Load() != 1 {
		t.Errorf("a negative duration was counted as a sample")
	}
}

func TestKBucket(t *testing.T) {
	prev := -1
	for k := int64(1); k < 1<<20; k += 1 + k/16 {
		b := kBucket(k)
		if b < prev || b >= numKBuckets {
			t.Fatalf("kBucket(%d) = %d after %d: not monotonic or out of range", k, b, prev)
		}
		prev = b
	}
	for _, k := range []int64{0, -5, 1 << 40} {
		if b := kBucket(k); b < 0 || b >= numKBuckets {
			t.Errorf("kBucket(%d) = %d: out of range", k, b)
		}
	}
	if kBucket(7) == kBucket(8) || kBucket(300) == kBucket(360) {
		t.Errorf("buckets too coarse: 7/8 or 300/360 share one")
	}
}

// requests fills an evidence with n requests per concurrency in ks, each
// taking latency(k).
func requests(ks []int64, n int64, latency func(k int64) time.Duration) *evidence {
	var ev evidence
	var w window
	w.dt = time.Second
	for _, k := range ks {
		b := kBucket(k)
		w.n[b] += n
		w.k[b] += n * k
		w.ns[b] += n * int64(latency(k))
	}
	ev.add(&w)
	return &ev
}

func TestElasticity(t *testing.T) {
	flat := func(int64) time.Duration { return 50 * time.Millisecond }
	queue := func(k int64) time.Duration { return time.Duration(k) * 10 * time.Millisecond }
	tests := []struct {
		name    string
		ev      *evidence
		lo, hi  float64 // want e in [lo, hi]; NaN bounds mean want NaN
		wantNaN bool
	}{
		{"latency independent of concurrency", requests([]int64{2, 4, 6, 9, 12}, 20, flat), -0.05, 0.05, false},
		{"latency in proportion", requests([]int64{9, 12, 16, 20, 30}, 20, queue), 0.95, 1.05, false},
		{"every request alone", requests([]int64{1}, 50, queue), 0, 0, false},
		{"no spread in concurrency", requests([]int64{300}, 80, queue), 0, 0, true},
		{"too few on one side", requests([]int64{3}, 60, flat), 0, 0, true},
	}
	for _, tt := range tests {
		e := tt.ev.elasticity()
		if tt.wantNaN != math.IsNaN(e) || !tt.wantNaN && (e < tt.lo || e > tt.hi) {
			t.Errorf("%s: elasticity = %v; want %v", tt.name, e, map[bool]string{true: "NaN", false: fmt.Sprintf("[%v, %v]", tt.lo, tt.hi)}[tt.wantNaN])
		}
	}
}

// learner drives a concState with synthetic evidence: every 50 ms period
// ends perPeriod requests spread over ks, each taking latency(k).
type learner struct {
	st  concState
	cfg concConfig
}

func newLearner() *learner {
	c := NewConcurrency()
	return &learner{st: c.st, cfg: c.cfg}
}

// stepFlow steps l by one 50 ms period with inflight requests in flight,
// starts that started and ends that ended (each after 5 ms, having
// started with one other in flight); standing is what the controller says
// (SetShedding(false)).
func (l *learner) stepFlow(inflight float64, starts, ends int64, standing bool) {
	w := window{dt: 50 * time.Millisecond, standing: standing, starts: starts, inflight: inflight}
	b := kBucket(2)
	w.n[b], w.k[b] = ends, 2*ends
	w.ns[b] = ends * int64(5*time.Millisecond)
	w.nsq[b] = w.ns[b]
	l.st.step(&w, l.cfg)
}

// quietLearner is a learner that has learned a 5 ms service time from 300
// ms of requests that waited for nobody.
func quietLearner() *learner {
	l := newLearner()
	l.run(300*time.Millisecond, []int64{2}, 20, func(int64) time.Duration { return 5 * time.Millisecond }, 0, false)
	return l
}

func (l *learner) run(d time.Duration, ks []int64, perPeriod int64, latency func(k int64) time.Duration, cpu float64, frozen bool) {
	for t := time.Duration(0); t < d; t += 50 * time.Millisecond {
		w := window{dt: 50 * time.Millisecond, cpu: cpu, frozen: frozen, starts: perPeriod * int64(len(ks))}
		for _, k := range ks {
			b := kBucket(k)
			w.n[b] += perPeriod
			w.k[b] += perPeriod * k
			d := latency(k)
			w.ns[b] += perPeriod * int64(d)
			if q := time.Duration(l.st.quietCapAt(l.cfg)); q > 0 { // as DoneAt caps it
				d = min(d, q)
			}
			w.nsq[b] += perPeriod * int64(d)
			w.inflight += float64(k) / float64(len(ks))
		}
		l.st.step(&w, l.cfg)
	}
}

func (l *learner) service() time.Duration { return seconds(l.st.service) }

func TestServiceTimeLearning(t *testing.T) {
	ks := []int64{2, 3, 4, 5, 6, 8, 10}
	const ms = time.Millisecond
	at := func(d time.Duration) func(int64) time.Duration { return func(int64) time.Duration { return d } }
	queue := func(k int64) time.Duration { return time.Duration(k) * 10 * ms } // waits for each other
	tests := []struct {
		name   string
		then   func(l *learner)
		lo, hi time.Duration // B afterwards
	}{
		{"learned from the first evidence", func(*learner) {}, 5 * ms, 5 * ms},
		{"falls towards faster readings within two seconds", func(l *learner) {
			l.st.service = 0.05
			l.run(2*time.Second, ks, 10, at(5*ms), 0, false)
		}, 5 * ms, 12 * ms},
		{"rises most of the way within a second when latency does not depend on concurrency", func(l *learner) {
			l.run(time.Second, ks, 10, at(50*ms), 0, false)
		}, 40 * ms, 50 * ms},
		{"does not rise while requests wait for each other", func(l *learner) {
			l.run(5*time.Second, ks, 10, queue, 0, false)
		}, 5 * ms, 5 * ms},
		{"does not rise while the process is overloaded", func(l *learner) {
			l.run(5*time.Second, ks, 10, at(50*ms), 0, true)
		}, 5 * ms, 5 * ms},
		{"rises from requests that had the handler (nearly) alone", func(l *learner) {
			l.run(time.Second, []int64{1, 2, 20, 40}, 10, func(k int64) time.Duration { return 50*ms + time.Duration(k)*10*ms }, 0, false)
		}, 40 * ms, 65 * ms},
		{"rises twentyfold most of the way within a second, though one request counts for at most 4 young times", func(l *learner) {
			l.run(time.Second, ks, 10, at(100*ms), 0, false)
		}, 70 * ms, 100 * ms},
		{"is not carried by a handful that waited on something else", func(l *learner) {
			// Every tenth period, the ten requests that started with the
			// fewest others in flight are held 0.9 s (a downstream's
			// retry-after): 10 of 350 in an evidence window.
			n := 0
			l.run(time.Second, ks, 10, func(k int64) time.Duration {
				if n++; k == 2 && n%10 == 0 {
					return 900 * ms
				}
				return 5 * ms
			}, 0, false)
		}, 5 * ms, 5200 * time.Microsecond},
		{"drifts slowly towards a slightly slower normal", func(l *learner) {
			l.run(time.Second, ks, 10, at(6*ms), 0, false)
		}, 5 * ms, 5200 * time.Microsecond},
	}
	for _, tt := range tests {
		l := newLearner()
		l.run(300*time.Millisecond, ks, 10, at(5*ms), 0, false)
		tt.then(l)
		if got := l.service(); got < tt.lo || got > tt.hi {
			t.Errorf("%s: service time %v; want [%v, %v]", tt.name, got, tt.lo, tt.hi)
		}
	}
}

func TestLatencyTarget(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name            string
		service, budget time.Duration
		ratio           float64
		want            time.Duration
	}{
		{"ratio × service time", 20 * ms, 0, 2, 40 * ms},
		{"floor", 100 * time.Microsecond, 0, 2, ms},
		{"ceiling", 6 * time.Second, 0, 2, 10 * time.Second},
		{"ceiling never below 1.5 × service time", 8 * time.Second, 0, 2, 12 * time.Second},
		{"half the callers' budget", 20 * ms, 60 * ms, 2, 30 * ms},
		{"never below 1.5 × service time", 20 * ms, 20 * ms, 2, 30 * ms},
		{"another ratio", 20 * ms, 0, 3, 60 * ms},
	}
	for _, tt := range tests {
		c := NewConcurrency(WithLatencyRatio(tt.ratio))
		st := concState{service: tt.service.Seconds(), budget: tt.budget.Seconds()}
		if got := seconds(st.latencyTarget(c.cfg)); (got - tt.want).Abs() > time.Microsecond {
			t.Errorf("%s: target %v; want %v", tt.name, got, tt.want)
		}
	}
}

func TestBudgetLearning(t *testing.T) {
	var st concState
	w := window{dt: 50 * time.Millisecond}
	w.budgets[budgetBucket(100*time.Millisecond)] = 5
	w.budgets[budgetBucket(time.Second)] = 9
	w.budgets[budgetBucket(30*time.Second)] = 3
	for range 4 {
		st.learnBudget(&w)
	}
	if got := seconds(st.budget); got < 700*time.Millisecond || got > 1500*time.Millisecond {
		t.Errorf("median budget %v; want about 1s (the middle bucket)", got)
	}
	learned := st.budget
	// Overloaded (frozen): longer budgets are not learned, shorter ones
	// are — a standing queue shortens what requests start with, and a
	// process that starts in an overload must still learn them (1 core,
	// 5 ms requests, 300 ms deadlines at 1.5× from the start: without
	// them the queue's target, 0.5 s, outlasted every deadline, and 0.57
	// of the CPU went on requests whose callers had gone; the
	// simulator's TestMechanics).
	w.frozen = true
	w.budgets = [numBudgetBuckets]int64{}
	w.budgets[budgetBucket(30*time.Second)] = 100
	for range 20 {
		st.learnBudget(&w)
	}
	if st.budget != learned {
		t.Errorf("budget moved up to %v while frozen; want it kept at %v", seconds(st.budget), seconds(learned))
	}
	w.budgets = [numBudgetBuckets]int64{}
	w.budgets[budgetBucket(5*time.Millisecond)] = 100
	for range 20 {
		st.learnBudget(&w)
	}
	if st.budget >= learned/2 {
		t.Errorf("budget %v after 1 s of 5 ms budgets while frozen; want it learned down from %v", seconds(st.budget), seconds(learned))
	}
	var cold concState // nothing learned yet, overloaded from the start
	for range 4 {
		cold.learnBudget(&w)
	}
	if got := seconds(cold.budget); got < 4*time.Millisecond || got > 8*time.Millisecond {
		t.Errorf("budget learned while overloaded from the start: %v; want about 5 ms", got)
	}
	quiet := window{dt: time.Second}
	for range 61 {
		st.learnBudget(&quiet)
	}
	if st.budget != 0 {
		t.Errorf("budget %v after a minute without any; want it forgotten", seconds(st.budget))
	}
}

// TestBudgetThroughTheSet: the median budget the callers send reaches
// Budget in its unit, and through Default's wiring caps the queue
// target at a quarter of it. (Budget once returned the learned seconds as
// nanoseconds: 0 for budgets under a second, a few nanoseconds above, and
// the queue target fell to its 5 ms floor whenever callers sent 1 s or
// more — found by the simulator once its instances had this signal.)
func TestBudgetThroughTheSet(t *testing.T) {
	for _, budget := range []time.Duration{300 * time.Millisecond, 2 * time.Second, 30 * time.Second} {
		set, err := Simulated(func() (time.Duration, error) { return 0, nil }, func() int { return 1 })
		if err != nil {
			t.Fatal(err)
		}
		c := set.Concurrency
		at := time.Unix(1000, 0)
		c.SampleAt(at)
		for range 40 { // 2 s of 50 ms periods, 4 requests each
			for range 4 {
				s := c.StartAt(at, budget)
				c.DoneAt(s, at.Add(time.Millisecond), 0)
			}
			at = at.Add(50 * time.Millisecond)
			c.SampleAt(at)
		}
		got := c.Budget()
		if got < budget/2 || got > 2*budget {
			t.Errorf("callers sending %v: Budget %v; want within a factor of 2 (its log2 bucket)", budget, got)
		}
		// Unlearned scale: 100 ms, capped by a quarter of the budget.
		set.Queue.SampleAt(at)
		want := min(100*time.Millisecond, got/4)
		if q := seconds(set.Queue.Target()); (q - want).Abs() > time.Microsecond {
			t.Errorf("callers sending %v: queue target %v; want min(100 ms, a quarter of %v) = %v", budget, q, got, want)
		}
	}
}

// slowDep is a dependency that answers in 5 ms, and in 50 ms from from to
// to.
func slowDep(from, to time.Duration) func(time.Duration) time.Duration {
	return func(t time.Duration) time.Duration {
		if t >= from && t < to {
			return 50 * time.Millisecond
		}
		return 5 * time.Millisecond
	}
}

// TestSlowDependency is issue 16's dependency shape on virtual time: 200 µs
// of CPU, a pool of 8 connections to a dependency that slows from 5 ms to
// 50 ms for 20 s and recovers, at a constant 0.7 of what the pool serves
// at 5 ms. The signal must let a controller (a generic one, not admit's)
// hold the slow phase at ≥ 0.9 of the pool's 160/s without late work, and
// give the load back within two seconds of the recovery.
func TestSlowDependency(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		s := newServer(seed)
		s.pool, s.cpu = 8, 200*time.Microsecond
		s.dep = slowDep(5*time.Second, 25*time.Second)
		offered := 0.7 * 1600
		s.rate = func(time.Duration) float64 { return offered }
		s.run(30 * time.Second)
		late := 0
		for _, b := range s.stats {
			late += b.late
		}
		fast, slow, after := s.goodput(1, 5), s.goodput(7, 25), s.goodput(27, 30)
		t.Logf("seed %d: goodput %.0f/s before, %.0f/s slow (p99 %v), %.0f/s from 2 s after the recovery; %d late",
			seed, fast, slow, s.p99(7, 25), after, late)
		if fast < 0.98*offered || s.tripped(time.Second, 5*time.Second) > 0 {
			t.Errorf("seed %d: %.0f/s served before the slowdown (%.3f of periods tripped); want all of %.0f and none", seed, fast, s.tripped(time.Second, 5*time.Second), offered)
		}
		if slow < 0.9*160 {
			t.Errorf("seed %d: %.0f/s served while the dependency is slow; want ≥ 0.9 of the pool's 160/s", seed, slow)
		}
		if p := s.p99(7, 25); p > 500*time.Millisecond {
			t.Errorf("seed %d: p99 %v in the slow phase; want ≤ 500ms (half the deadline)", seed, p)
		}
		if late > 200 {
			t.Errorf("seed %d: %d handler runs after their deadline; want ≤ 200 (≤ 5%% of the slow phase)", seed, late)
		}
		if after < 0.95*offered {
			t.Errorf("seed %d: %.0f/s served from 2 s after the recovery; want ≥ 0.95 of %.0f", seed, after, offered)
		}
	}
}

// TestDependencyStops: requests pile up behind a dependency that stops
// answering; no request ends, yet the signal must read overloaded within a
// few periods.
func TestDependencyStops(t *testing.T) {
	s := newServer(4)
	s.pool, s.cpu = 8, 200*time.Microsecond
	s.dep = func(t time.Duration) time.Duration {
		if t >= 3*time.Second {
			return time.Hour
		}
		return 5 * time.Millisecond
	}
	s.rate = func(time.Duration) float64 { return 500 }
	s.run(3500 * time.Millisecond)
	for _, x := range s.trace {
		if x.value > 1 {
			if x.t > 3300*time.Millisecond {
				t.Errorf("first read overloaded at %v; want within 300ms of the dependency stopping at 3s", x.t)
			}
			if x.t < 3*time.Second {
				t.Errorf("read overloaded at %v, before the dependency stopped", x.t)
			}
			return
		}
	}
	t.Errorf("never read overloaded while the dependency did not answer")
}

// TestTrafficSteps: the load on a healthy pool-bound handler doubles at
// once, and doubles again; nothing waits, so nothing must trip.
func TestTrafficSteps(t *testing.T) {
	for _, dep := range []time.Duration{5 * time.Millisecond, 100 * time.Millisecond} {
		s := newServer(5)
		s.pool, s.cpu = 1000, 200*time.Microsecond
		s.dep = func(time.Duration) time.Duration { return dep }
		s.cpuOff = true
		s.rate = func(t time.Duration) float64 {
			switch {
			case t < 3*time.Second:
				return 200
			case t < 6*time.Second:
				return 400
			}
			return 800
		}
		s.run(9 * time.Second)
		if f := s.tripped(time.Second, 9*time.Second); f > 0 {
			t.Errorf("dependency %v: tripped in %.3f of the periods across two traffic steps; want none", dep, f)
		}
	}
}

// TestNoTripCPUBound: CPU-bound handlers sharing the cores (the run queue
// of admit bounds how many run at once, as leveehttp does; without it at
// loads that fit) wait for the CPU inside the handler; that is the CPU
// signal's to see. The concurrency signal must not trip.
func TestNoTripCPUBound(t *testing.T) {
	for _, cores := range []float64{1, 4} {
		for _, work := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
			for _, tc := range []struct {
				bound int
				load  float64
			}{{4, 0.5}, {4, 0.9}, {4, 2}, {1 << 30, 0.5}, {1 << 30, 0.8}} {
				s := newServer(6)
				s.cores, s.work, s.runBound = cores, work, tc.bound
				capacity := cores / work.Seconds()
				s.rate = func(time.Duration) float64 { return tc.load * capacity }
				s.run(10 * time.Second)
				if f := s.tripped(time.Second, 10*time.Second); f > 0.01 {
					t.Errorf("%v cores, %v of CPU, run bound %d, load %.1f: tripped in %.3f of the periods; want ≤ 0.01",
						cores, work, tc.bound, tc.load, f)
				}
			}
		}
	}
}

func TestConcurrencyOptions(t *testing.T) {
	tests := []struct {
		opt  ConcurrencyOption
		want string
	}{
		{WithConcurrencyPeriod(time.Millisecond), "WithConcurrencyPeriod(1ms): must be in [10ms, 1m] (0 means the default, 50ms)"},
		{WithConcurrencySmoothing(-1), "WithConcurrencySmoothing(-1ns): must be in [0, 1m] (0 means none)"},
		{WithLatencyRatio(1.1), "WithLatencyRatio(1.1): must be in [1.2, 100] (0 means the default, 2)"},
		{WithLatencyRatio(math.NaN()), "WithLatencyRatio(NaN): must be in [1.2, 100] (0 means the default, 2)"},
		{WithLatencyBounds(-time.Millisecond, 0), "WithLatencyBounds(-1ms, 0s): want 0 < floor ≤ ceiling ≤ 1h (0 means the default, 1ms and 10s)"},
		{WithLatencyBounds(time.Second, time.Millisecond), "WithLatencyBounds(1s, 1ms): want 0 < floor ≤ ceiling ≤ 1h (0 means the default, 1ms and 10s)"},
		{WithMinQueue(-1), "WithMinQueue(-1): must be in [1, 1e6] (0 means the default, 4)"},
	}
	for _, tt := range tests {
		if got, want := panicMessage(func() { NewConcurrency(tt.opt) }), "pressure: "+tt.want; got != want {
			t.Errorf("NewConcurrency panicked with %q; want %q", got, want)
		}
	}
	c := NewConcurrency(WithConcurrencyPeriod(0), WithLatencyRatio(0), WithLatencyBounds(0, time.Minute), WithMinQueue(0),
		WithConcurrencyCPU(nil), WithConcurrencyFreeze(nil))
	if c.Period() != 50*time.Millisecond || c.cfg.ratio != 2 || c.cfg.floorT != time.Millisecond || c.cfg.ceilT != time.Minute ||
		c.cfg.minQueue != 4 || c.cfg.cpu == nil || c.cfg.freeze == nil {
		t.Errorf("zero and nil options: %+v; want the defaults (and the 1m ceiling given)", c.cfg)
	}
}

// TestRestartAfterSilence: a handler whose requests take long (a 1 s or
// 300 ms dependency with room for all) stops receiving requests for two
// seconds — an upstream outage, or admission shedding everything — and
// then gets its normal load back. For the first service time after the
// restart nothing can complete, by physics; the requests in flight are
// young, nobody waits, and the signal must not read them as a queue (it
// did: completions near zero capped "served", the controller cut, fewer
// completed, and a server could stay shut long after its overload).
func TestRestartAfterSilence(t *testing.T) {
	for _, dep := range []time.Duration{300 * time.Millisecond, time.Second} {
		s := newServer(6)
		s.pool, s.cpu = 1000, 200*time.Microsecond
		s.dep = func(time.Duration) time.Duration { return dep }
		s.deadline = 10 * time.Second
		s.cpuOff = true
		s.rate = func(t time.Duration) float64 {
			if t >= 10*time.Second && t < 12*time.Second {
				return 0
			}
			return 100
		}
		s.run(20 * time.Second)
		if f := s.tripped(time.Second, 10*time.Second); f > 0 {
			t.Errorf("dependency %v: tripped in %.3f of the periods before the silence; want none", dep, f)
		}
		if f := s.tripped(12*time.Second, 20*time.Second); f > 0 {
			t.Errorf("dependency %v: tripped in %.3f of the periods after the silence; want none", dep, f)
		}
		offered, admitted := 0, 0
		for _, b := range s.stats[12:20] {
			offered, admitted = offered+b.offered, admitted+b.admitted
		}
		if admitted < offered*99/100 {
			t.Errorf("dependency %v: %d of %d requests admitted after the restart; want ≥ 99%%", dep, admitted, offered)
		}
	}
}

// TestTrafficReturns: a handler whose requests wait on a dependency with
// room for all (1 ms, 50 ms, 300 ms or 1 s) loses nine tenths of its traffic
// for a while — an upstream partial outage, or another gate (a goroutine
// ceiling, a memory limit) refusing most requests — and then gets it all
// back at once. The handler is never empty, so the restart rule does not
// apply; for a service time the completions are those of the dip. The
// requests in flight are young and nobody waits: the signal must not read
// the return as a flood (it did: "served" was capped at twice what the
// dip's completions explain, a controller cut, the completions stayed
// low, and the misreading fed itself for seconds), whatever the dip's
// length.
func TestTrafficReturns(t *testing.T) {
	for _, dep := range []time.Duration{time.Millisecond, 50 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		for _, dip := range []time.Duration{2 * time.Second, 10 * time.Second, 60 * time.Second} {
			s := newServer(7)
			s.pool, s.cpu = 1000, 200*time.Microsecond
			s.dep = func(time.Duration) time.Duration { return dep }
			s.deadline = 10 * time.Second
			s.cpuOff = true
			back := 10*time.Second + dip
			s.rate = func(t time.Duration) float64 {
				if t >= 10*time.Second && t < back {
					return 20
				}
				return 200
			}
			s.run(back + 10*time.Second)
			if f := s.tripped(time.Second, back); f > 0 {
				t.Errorf("dependency %v, dip %v: tripped in %.3f of the periods before the return; want none", dep, dip, f)
			}
			if f := s.tripped(back, back+10*time.Second); f > 0 {
				t.Errorf("dependency %v, dip %v: tripped in %.3f of the periods after the return; want none", dep, dip, f)
			}
			from := int(back / time.Second)
			offered, admitted := 0, 0
			for _, b := range s.stats[from : from+10] {
				offered, admitted = offered+b.offered, admitted+b.admitted
			}
			if admitted < offered*99/100 {
				t.Errorf("dependency %v, dip %v: %d of %d requests admitted after the return; want ≥ 99%%", dep, dip, admitted, offered)
			}
		}
	}
}

// TestPeakForgets: the most requests in service the completions explained
// is kept while a dip lasts and forgotten over minutes, never while
// another signal says the process is overloaded (a peak raised by one
// burst must not loosen the flood reading for good).
func TestPeakForgets(t *testing.T) {
	var s concState
	w := &window{dt: 50 * time.Millisecond}
	s.notePeak(200, w)
	for range 20 * 60 { // one minute at 20
		s.notePeak(20, w)
	}
	if s.peak < 150 || s.peak > 180 {
		t.Errorf("peak %.1f after a minute at 20 from 200; want about 20 + 180·e^(−1/5) ≈ 167", s.peak)
	}
	held := s.peak
	w.frozen = true
	for range 20 * 60 {
		s.notePeak(20, w)
	}
	if s.peak != held {
		t.Errorf("peak moved from %.1f to %.1f while frozen; want held", held, s.peak)
	}
	w.frozen = false
	for range 20 * 60 * 30 { // half an hour
		s.notePeak(20, w)
	}
	if s.peak > 21 {
		t.Errorf("peak %.1f after half an hour at 20; want forgotten (≤ 21)", s.peak)
	}
	s.notePeak(500, w)
	if s.peak != 500 {
		t.Errorf("peak %.1f after a reading of 500; want 500 at once", s.peak)
	}
}

// TestFloodAfterPeakRaised: a caller who first sends a burst (here 10× the
// normal traffic for a second) raises the peak the early flood reading
// compares against. That may only delay the reading until the flood's
// requests outlast 1.5 service times: a dependency that stops answering
// five seconds later must still read overloaded within 300 ms, as it does
// without the burst (TestDependencyStops).
func TestFloodAfterPeakRaised(t *testing.T) {
	s := newServer(8)
	s.pool, s.cpu = 1000, 200*time.Microsecond
	s.dep = func(t time.Duration) time.Duration {
		if t >= 8*time.Second {
			return time.Hour
		}
		return 5 * time.Millisecond
	}
	s.cpuOff = true
	s.rate = func(t time.Duration) float64 {
		if t >= 2*time.Second && t < 3*time.Second {
			return 5000
		}
		return 500
	}
	s.run(8500 * time.Millisecond)
	if f := s.tripped(time.Second, 8*time.Second); f > 0 {
		t.Errorf("tripped in %.3f of the periods before the dependency stopped (a burst is no overload); want none", f)
	}
	for _, x := range s.trace {
		if x.t >= 8*time.Second && x.value > 1 {
			t.Logf("first read overloaded %v after the dependency stopped", x.t-8*time.Second)
			if x.t > 8300*time.Millisecond {
				t.Errorf("first read overloaded at %v; want within 300ms of the dependency stopping at 8s", x.t)
			}
			return
		}
	}
	t.Errorf("never read overloaded while the dependency did not answer")
}

// TestStandingQueue: while the controller says it does not shed, a queue
// that stands (as many requests start as end) may reach the standing
// level, capped by half the callers' budget; a queue that grows, or any
// queue while the controller sheds or has never said, is held to the
// latency target. (A gateway in front of a backend at 0.9 of its capacity
// shed work the backend was serving: 10 % of it on one core of 20 ms
// requests and on four of 100 ms, in the simulator.)
func TestStandingQueue(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name           string
		standing       bool
		starts         int64 // per 50 ms period; 20 end in each
		budget         float64
		wantLo, wantHi float64 // Allowed
	}{
		{"not told: the latency target", false, 20, 0, 4, 4},
		{"not shedding, standing: the standing level", true, 20, 0, standingQueue, standingQueue},
		{"not shedding, growing: the latency target", true, 60, 0, 4, 4},
		{"not shedding, standing, 60 ms budgets: half of it", true, 20, 0.06, 9, 11},
	}
	for _, tt := range tests {
		l := quietLearner()
		l.st.budget = tt.budget
		for range 10 {
			l.stepFlow(30, tt.starts, 20, tt.standing)
		}
		r := l.st.readingAt(time.Time{})
		if r.Allowed < tt.wantLo || r.Allowed > tt.wantHi {
			t.Errorf("%s: allowed %.1f (served %.1f, queue %.1f, standing %v); want [%v, %v]", tt.name, r.Allowed, r.Served, r.Queue, r.Standing, tt.wantLo, tt.wantHi)
		}
	}
	// Through the signal: SetShedding(false) allows the standing queue,
	// SetShedding(true) holds the target again.
	c := NewConcurrency()
	at := time.Unix(1000, 0)
	c.SampleAt(at)
	var starts []Start
	feed := func(hold int) {
		for range 10 {
			for range 20 {
				s := c.StartAt(at, 0)
				c.DoneAt(s, at.Add(5*ms), 0)
			}
			for len(starts) < hold {
				starts = append(starts, c.StartAt(at, 0))
			}
			at = at.Add(50 * ms)
			c.SampleAt(at)
		}
	}
	feed(0)
	c.SetShedding(false)
	feed(30)
	standing := c.Value()
	c.SetShedding(true)
	feed(30)
	if shedding := c.Value(); !(standing < 1 && shedding > 1) {
		t.Errorf("30 requests held: value %.2f while not shedding, %.2f while shedding; want < 1 and > 1", standing, shedding)
	}
}

// TestSwing: how far a standing queue swings by itself while the
// controller does not shed is learned, slowly, and allowed — also while
// it sheds, so that a dependency whose own times are heavy-tailed does
// not keep an episode going; a queue that grows, or one seen while the
// controller sheds, teaches nothing, and what was learned fades.
func TestSwing(t *testing.T) {
	const ms = time.Millisecond
	// A queue of 60 that comes and goes, as many starting as ending.
	swings := func(l *learner, d time.Duration, standing bool) {
		for i := range int(d / (50 * ms)) {
			l.stepFlow(float64(2+60*(i%2)), 20, 20, standing)
		}
	}
	l := quietLearner()
	swings(l, 30*time.Second, true)
	l.stepFlow(62, 20, 20, false) // the controller sheds
	if r := l.st.readingAt(time.Time{}); r.Allowed < 100 || r.Value > 1 {
		t.Errorf("a standing queue swinging to 60 for 30 s, then shedding: allowed %.1f, value %.2f; want ≥ 100 and ≤ 1", r.Allowed, r.Value)
	}
	for range int(40 * time.Second / (50 * ms)) {
		l.stepFlow(2, 20, 20, true)
	}
	if a := l.st.swing.allowance(); a > 20 {
		t.Errorf("40 s after the swings stopped: allowance %.1f; want ≤ 20", a)
	}

	l = quietLearner()
	for range int(10 * time.Second / (50 * ms)) {
		l.stepFlow(30, 60, 20, true) // 40 more start than end each period
	}
	if l.st.swing.queueMS != 0 {
		t.Errorf("a growing queue taught a swing of %.1f", l.st.swing.allowance())
	}
	l = quietLearner()
	swings(l, 30*time.Second, false)
	if l.st.swing.queueMS != 0 {
		t.Errorf("a queue seen while the controller shed taught a swing of %.1f", l.st.swing.allowance())
	}
}
