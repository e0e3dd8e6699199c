package throttle

import (
	"errors"
	"hash/maphash"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestSteadyState(t *testing.T) {
	tests := []struct {
		name              string
		k                 float64
		opts              []Option
		recvTol, localTol float64 // relative, absolute
	}{
		{"K=2", 2, nil, 0.05, 0.02},
		{"K=1.1", 1.1, nil, 0.03, 0.02},
		{"K=2 plain SRE", 2, []Option{WithRecovery(0)}, 0.05, 0.02},
		{"K=1.1 plain SRE", 1.1, []Option{WithRecovery(0)}, 0.03, 0.02},
		{"K=2 10 accepts/s", 2, nil, 0.05, 0.02},
		{"K=2 Poisson", 2, nil, 0.05, 0.02},
		{"K=1.1 Poisson", 1.1, nil, 0.03, 0.02},
		{"K=2 Poisson 10 accepts/s", 2, nil, 0.05, 0.02},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := Scenario{K: tt.k, Load: 10, Options: tt.opts, Seed: 1}
			if strings.HasSuffix(tt.name, "10 accepts/s") {
				sc.Capacity = 10
			}
			sc.Poisson = strings.Contains(tt.name, "Poisson")
			got := Simulate(sc)
			want := Formula(tt.k, 10)
			t.Logf("got %+v want %+v", got, want)
			if math.Abs(got.Received-want.Received) > tt.recvTol*want.Received {
				t.Errorf("backend receives %.4f×A, want %.2f×A ± %.0f%%", got.Received, want.Received, tt.recvTol*100)
			}
			if math.Abs(got.LocalReject-want.LocalReject) > tt.localTol {
				t.Errorf("local rejections %.4f, want %.3f ± %.2f", got.LocalReject, want.LocalReject, tt.localTol)
			}
			if math.Abs(got.BackendReject-want.BackendReject) > 0.03 {
				t.Errorf("backend rejects %.4f of what it gets, want %.3f ± 0.03", got.BackendReject, want.BackendReject)
			}
		})
	}
}

func TestFormula(t *testing.T) {
	tests := []struct {
		k, load float64
		want    Steady
	}{
		{2, 10, Steady{Received: 2, LocalReject: 0.8, BackendReject: 0.5}},
		{1.1, 10, Steady{Received: 1.1, LocalReject: 0.89, BackendReject: 1 - 1/1.1}},
		{2, 1.5, Steady{Received: 1.5, LocalReject: 0, BackendReject: 1 - 1/1.5}},
		{2, 0.5, Steady{Received: 0.5}},
		{0.5, 10, Steady{Received: 1, LocalReject: 0.9}}, // K below 1 counts as 1
		{2, 0, Steady{}},
	}
	for _, tt := range tests {
		got := Formula(tt.k, tt.load)
		if math.Abs(got.Received-tt.want.Received) > 1e-12 || math.Abs(got.LocalReject-tt.want.LocalReject) > 1e-12 ||
			math.Abs(got.BackendReject-tt.want.BackendReject) > 1e-12 {
			t.Errorf("Formula(%v, %v) = %+v, want %+v", tt.k, tt.load, got, tt.want)
		}
	}
}

func TestSimulateShallowBacklog(t *testing.T) {
	// A backend with a 50 ms queue, as the simulator's K sweep models it.
	for _, k := range []float64{2, 1.1} {
		got := Simulate(Scenario{K: k, Burst: 50 * time.Millisecond})
		want := Formula(k, 10)
		t.Logf("K=%v got %+v", k, got)
		if math.Abs(got.Received-want.Received) > 0.03*want.Received || math.Abs(got.LocalReject-want.LocalReject) > 0.02 {
			t.Errorf("K=%v: %+v, want %+v ± 3%%", k, got, want)
		}
	}
}

func TestSimulateDeterministic(t *testing.T) {
	sc := Scenario{K: 2, Seed: 7, Warmup: time.Minute, Measure: time.Minute}
	a, b := Simulate(sc), Simulate(sc)
	if a != b {
		t.Errorf("same scenario, different results: %+v vs %+v", a, b)
	}
}

type phase struct {
	d    time.Duration
	load float64 // offered / capacity
}

// run drives a Throttle against a 100/s token-bucket backend through the
// phases and returns the local rejection share of every second of the
// last phase.
func run(th *Throttle, phases []phase) []float64 { return runLatency(th, phases, 0) }

// runLatency is run with responses arriving lat after the send: outcomes
// are reported then.
func runLatency(th *Throttle, phases []phase, lat time.Duration) []float64 {
	return runBackend(th, phases, lat, 100)
}

// runBackend is runLatency against a backend of capacity cap requests per
// second: drive with evenly spaced arrivals.
func runBackend(th *Throttle, phases []phase, lat time.Duration, capacity float64) []float64 {
	stages := make([]stage, len(phases))
	for i, p := range phases {
		stages[i] = stage{d: p.d, load: p.load}
	}
	return drive(th, stages, driveOpts{lat: lat, capacity: capacity})
}

func TestRecoveryAfterSpike(t *testing.T) {
	// A 30 s spike at 3× capacity on a fresh client, then the offered load
	// returns to the capacity: the backend accepts everything again.
	spike := []phase{{30 * time.Second, 3}, {60 * time.Second, 1}}
	tests := []struct {
		name     string
		opts     []Option
		within   int     // seconds after the spike
		below    float64 // local rejection share from then on
		slowFrom float64 // plain SRE: still above this at second 5
	}{
		{"levee K=2", nil, 5, 0.05, 0},
		{"levee K=1.1", []Option{WithK(1.1)}, 5, 0.05, 0},
		{"plain SRE K=2", []Option{WithRecovery(0)}, 0, 0, 0.10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(New(tt.opts...), spike)
			t.Logf("local rejection share per second after the spike: %.3f", got[:12])
			if tt.slowFrom > 0 {
				if got[5] <= tt.slowFrom {
					t.Errorf("plain SRE window rejects %.3f in second 5, want > %.2f (the slow tail this package removes)", got[5], tt.slowFrom)
				}
				return
			}
			for s := tt.within; s < len(got); s++ {
				if got[s] >= tt.below {
					t.Fatalf("second %d after the spike: local rejections %.3f, want < %.2f", s, got[s], tt.below)
				}
			}
		})
	}
}

func TestRecoveryAfterLongOverload(t *testing.T) {
	// Five minutes at 10× (P ≈ 0.8), then the load returns to the capacity.
	got := run(New(), []phase{{5 * time.Minute, 10}, {30 * time.Second, 1}})
	t.Logf("K=2 after 5 min at 10×: %.3f", got[:8])
	for s := 5; s < len(got); s++ {
		if got[s] >= 0.05 {
			t.Fatalf("second %d: local rejections %.3f, want < 0.05", s, got[s])
		}
	}
}

func TestRecoveryWithLatency(t *testing.T) {
	// Accepts arrive when the response does; requests in flight look
	// unaccepted. K = 2 still recovers within 5 s.
	for _, lat := range []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond} {
		for _, tt := range []struct {
			name   string
			phases []phase
		}{
			{"30 s at 3×", []phase{{30 * time.Second, 3}, {30 * time.Second, 1}}},
			{"5 min at 10×", []phase{{5 * time.Minute, 10}, {30 * time.Second, 1}}},
		} {
			got := runLatency(New(), tt.phases, lat)
			t.Logf("latency %v, %s: %.2f", lat, tt.name, got[:8])
			for s := 5; s < len(got); s++ {
				if got[s] >= 0.05 {
					t.Errorf("latency %v, after %s: second %d rejects %.3f locally, want < 0.05", lat, tt.name, s, got[s])
					break
				}
			}
		}
	}
}

func TestColdStartSlowBackend(t *testing.T) {
	// A fresh client at half the capacity of a healthy backend that
	// answers in 300 ms: nothing is rejected, so nothing may be throttled.
	// Counted at the send, the first 300 ms of requests had no accepts to
	// match and the recent horizon read a deficit: measured, 58% and 21%
	// local rejections in the first two seconds at 300 ms, and at 1 s
	// from 89% down to 6% over seven seconds.
	for _, lat := range []time.Duration{50 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		got := runBackend(New(), []phase{{10 * time.Second, 0.5}}, lat, 1000)
		for s, v := range got {
			if v != 0 {
				t.Errorf("latency %v, second %d: local rejections %.3f of a healthy backend's requests, want 0", lat, s, v)
			}
		}
	}
}

func TestOnsetNeedsBothHorizons(t *testing.T) {
	// After two minutes at capacity, a 30 s spike at 3× never builds a
	// deficit over the 2-minute window: no local rejection (as the plain SRE
	// throttle), however loudly the last second complains.
	got := run(New(), []phase{{2 * time.Minute, 1}, {30 * time.Second, 3}})
	for s, v := range got {
		if v != 0 {
			t.Fatalf("second %d of the spike: local rejections %.3f, want 0", s, v)
		}
	}
}

func TestCriticalityLadder(t *testing.T) {
	// Half Sheddable, half Critical, 10× a backend that does not look at
	// criticality: the local rejections land on Sheddable first.
	th := New()
	b := newBucket(100, time.Second)
	gap := time.Second / 1000
	for at := time.Duration(0); at < 4*time.Minute; at += gap {
		c := levee.Critical
		if int(at/gap)%2 == 0 {
			c = levee.Sheddable
		}
		now := t0.Add(at)
		if th.AllowAt(now, c) == nil {
			th.DoneAt(now, c, b.take(at))
		}
	}
	now := t0.Add(4 * time.Minute)
	ps, pc := th.RejectProbabilityAt(now, levee.Sheddable), th.RejectProbabilityAt(now, levee.Critical)
	st := th.Stats()
	t.Logf("P(sheddable)=%.3f P(critical)=%.3f stats=%+v", ps, pc, st)
	if ps < 0.99 {
		t.Errorf("P(Sheddable) = %.3f, want ≥ 0.99 (refused first)", ps)
	}
	// The deficit 10A−2A = 8A: 5A of it is Sheddable's, 3A lands on
	// Critical's 5A: P ≈ 0.6.
	if math.Abs(pc-0.6) > 0.03 {
		t.Errorf("P(Critical) = %.3f, want 0.60 ± 0.03", pc)
	}
	if p := th.RejectProbabilityAt(now, levee.CriticalPlus); p != 0 {
		t.Errorf("P(CriticalPlus) with no traffic = %.3f, want 0", p)
	}
}

func TestHealthyBackendNeverThrottled(t *testing.T) {
	th := New()
	for i := range 100000 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if err := th.AllowAt(now, levee.Critical); err != nil {
			t.Fatalf("request %d throttled with every request accepted: %v", i, err)
		}
		th.DoneAt(now, levee.Critical, true)
	}
}

func TestRejectionError(t *testing.T) {
	th := New()
	var err error
	for i := 0; err == nil && i < 100000; i++ {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if err = th.AllowAt(now, levee.Critical); err == nil {
			th.DoneAt(now, levee.Critical, false) // the backend rejects all
		}
	}
	if !errors.Is(err, levee.ErrThrottled) || err != ErrThrottled {
		t.Fatalf("error %v, want ErrThrottled", err)
	}
	r := levee.AsRejected(err)
	if r == nil || r.Reason != levee.Throttled || r.RetryAfter != 0 || r.NoRetry {
		t.Errorf("rejection %+v, want Reason Throttled", r)
	}
}

func TestInvalidCriticalityCountsAsCritical(t *testing.T) {
	th := New()
	th.AllowAt(t0, levee.Criticality(9))
	th.DoneAt(t0, levee.Criticality(200), true)
	st := th.Stats()
	if st.Requests[levee.Critical] != 1 || st.Accepts[levee.Critical] != 1 || st.Completed[levee.Critical] != 1 {
		t.Errorf("stats %+v, want one Critical request and accept", st)
	}
}

func TestNilThrottle(t *testing.T) {
	var th *Throttle
	if err := th.AllowAt(t0, levee.Sheddable); err != nil {
		t.Errorf("nil Throttle: AllowAt = %v, want nil", err)
	}
	if err := th.Allow(levee.Sheddable); err != nil {
		t.Errorf("nil Throttle: Allow = %v, want nil", err)
	}
	th.DoneAt(t0, levee.Sheddable, true)
	th.Done(levee.Sheddable, false)
	if p := th.RejectProbabilityAt(t0, levee.Sheddable); p != 0 {
		t.Errorf("nil Throttle: P = %v, want 0", p)
	}
	if s := th.Stats(); s != (Stats{}) {
		t.Errorf("nil Throttle: Stats = %+v, want zero", s)
	}
}

func TestZeroTime(t *testing.T) {
	// Virtual clocks may start anywhere, even at the zero time.
	th := New()
	var z time.Time
	for i := range 1000 {
		now := z.Add(time.Duration(i) * 10 * time.Millisecond)
		if th.AllowAt(now, levee.Critical) == nil {
			th.DoneAt(now, levee.Critical, true)
		}
	}
	if s := th.Stats(); s.Requests[levee.Critical] != 1000 || s.Rejected[levee.Critical] != 0 {
		t.Errorf("stats %+v, want 1000 requests, 0 rejected", s)
	}
}

func TestStatsDeterministicPerSeed(t *testing.T) {
	play := func(seed uint64) Stats {
		th := New(WithSeed(seed))
		for i := range 200000 {
			now := t0.Add(time.Duration(i) * time.Millisecond)
			if th.AllowAt(now, levee.Critical) == nil {
				th.DoneAt(now, levee.Critical, i%7 == 0)
			}
		}
		return th.Stats()
	}
	a, b, c := play(1), play(1), play(2)
	if a != b {
		t.Errorf("seed 1 twice: %+v vs %+v", a, b)
	}
	if a.Rejected == c.Rejected {
		t.Logf("seeds 1 and 2 rejected the same counts (possible, unlikely): %v", a.Rejected)
	}
}

func TestConcurrentUse(t *testing.T) {
	th := New()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20000 {
				now := t0.Add(time.Duration(i) * time.Millisecond)
				if th.AllowAt(now, levee.Criticality(g)) == nil {
					th.DoneAt(now, levee.Criticality(g), i%3 == 0)
				}
				if i%1000 == 0 {
					th.Stats()
					th.RejectProbabilityAt(now, levee.Criticality(g))
				}
			}
		}()
	}
	wg.Wait()
	var n uint64
	for _, r := range th.Stats().Requests {
		n += r
	}
	if n != 80000 {
		t.Errorf("requests counted %d, want 80000", n)
	}
}

func TestAllocs(t *testing.T) {
	th := New()
	g := NewGroup()
	g.Get("a")
	now := t0
	tests := []struct {
		name string
		f    func()
	}{
		{"AllowAt+DoneAt", func() {
			now = now.Add(time.Millisecond)
			if th.AllowAt(now, levee.Critical) == nil {
				th.DoneAt(now, levee.Critical, true)
			}
		}},
		{"AllowAt throttled", func() { now = now.Add(time.Millisecond); th.AllowAt(now, levee.Sheddable) }},
		{"Allow+Done", func() {
			if th.Allow(levee.Critical) == nil {
				th.Done(levee.Critical, true)
			}
		}},
		{"Group.Get", func() { g.Get("a") }},
		{"Stats", func() { _ = th.Stats() }},
	}
	for _, tt := range tests {
		if n := testing.AllocsPerRun(1000, tt.f); n != 0 {
			t.Errorf("%s: %v allocs per run, want 0", tt.name, n)
		}
	}
}

func TestGroupBounded(t *testing.T) {
	g := NewGroup(WithMaxKeys(3))
	keys := []string{"a", "b", "c", "d", "e"}
	for i, k := range keys {
		th := g.Get(k)
		th.AllowAt(t0.Add(time.Duration(i)*time.Second), levee.Critical)
		if g.Get(k) != th {
			t.Fatalf("Get(%q) twice returned different throttles", k)
		}
	}
	if n := g.Len(); n != 3 {
		t.Errorf("Len = %d, want 3", n)
	}
	// The most recently used keys stay.
	for _, k := range []string{"c", "d", "e"} {
		if !g.has(k) {
			t.Errorf("key %q evicted, want kept (the idlest goes first)", k)
		}
	}
}

func TestGroupKeysDecideIndependently(t *testing.T) {
	g := NewGroup(WithSeed(1))
	a, b := g.Get("a"), g.Get("b")
	if a.seed == b.seed {
		t.Errorf("keys share the seed %d; want it mixed with the key", a.seed)
	}
}

func TestSteadyStateSweep(t *testing.T) {
	// The steady state holds from a few accepts per second up.
	for _, capacity := range []float64{3, 10, 30, 100} {
		for _, k := range []float64{2, 1.1} {
			got := Simulate(Scenario{K: k, Capacity: capacity})
			want := Formula(k, 10)
			t.Logf("capacity %4.0f/s K=%.1f: received %.3f×A (want %.2f), local %.3f, backend %.3f",
				capacity, k, got.Received, want.Received, got.LocalReject, got.BackendReject)
			if d := (got.Received - want.Received) / want.Received; d < -0.02 || d > 0.02 {
				t.Errorf("capacity %v K=%v: received %.3f×A, want %.2f×A ± 2%%", capacity, k, got.Received, want.Received)
			}
		}
	}
}

func TestOnsetLikeSRE(t *testing.T) {
	// From two minutes at capacity to 10×: the throttle engages as the
	// 2-minute window fills, as the book's does, and reaches the steady
	// state within the window.
	phases := []phase{{2 * time.Minute, 1}, {3 * time.Minute, 10}}
	lv, sre := run(New(), phases), run(New(WithRecovery(0)), phases)
	every := func(v []float64) []float64 {
		var out []float64
		for i := 9; i < len(v); i += 10 {
			out = append(out, v[i])
		}
		return out
	}
	t.Logf("local rejection share every 10 s: levee %.2f", every(lv))
	t.Logf("                                  SRE   %.2f", every(sre))
	for s := 120; s < len(lv); s++ {
		if lv[s] < 0.75 {
			t.Fatalf("second %d of the overload: local rejections %.3f, want ≥ 0.75 once the window is full", s, lv[s])
		}
	}
}

func TestAcrossTheEpoch(t *testing.T) {
	// The long window's ring must not fold buckets onto each other when
	// virtual time crosses 1970.
	th := New()
	start := time.Unix(-60, 0)
	for i := range 240000 { // 2 minutes at 2000/s, one in ten accepted
		now := start.Add(time.Duration(i) * 500 * time.Microsecond)
		if th.AllowAt(now, levee.Critical) == nil {
			th.DoneAt(now, levee.Critical, i%10 == 0)
		}
	}
	if p := th.RejectProbabilityAt(start.Add(2*time.Minute), levee.Critical); p < 0.7 {
		t.Errorf("P = %.3f after 2 minutes at 10× across 1970, want ≈ 0.8", p)
	}
}

// has reports whether g holds key, without adding it.
func (g *Group) has(key string) bool {
	h := maphash.String(g.seed, key)
	return lookup(g.buckets[h&g.mask].Load(), key, h) != nil
}
