package admit

import (
	"github.com/levee-dev/levee/internal/smooth"
	"math"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

const testDt = DefaultPeriod

// countsAfter returns c with n more arrivals of criticality cr, of which
// dl, q and o were rejected for deadline, quota and overload.
func countsAfter(c counts, cr levee.Criticality, n, dl, q, o uint64) counts {
	c.arrivals[cr] += n
	c.rejected[cr][levee.Deadline] += dl
	c.rejected[cr][levee.Quota] += q
	c.rejected[cr][levee.Overloaded] += o
	return c
}

func TestMeterStep(t *testing.T) {
	// Each case warms a meter with `periods` periods of `before` Critical
	// arrivals a period, then steps one period with `next` arrivals.
	tests := []struct {
		name         string
		before, next uint64
		periods      int
		shedding     bool
		behind       bool // in the last period
		load, capEst float64
		rejected     [3]uint64 // deadline, quota, overload in the last period
		wantR        float64   // requests/s
		wantJump     bool
		wantFlood    bool
		wantAdmitted float64
		wantArrived  float64
		tolR         float64
	}{
		{name: "first period taken at once", next: 50, wantR: 1000, wantJump: true, wantAdmitted: 1000, wantArrived: 1000},
		{name: "noise smoothed", before: 50, periods: 40, next: 55, load: 0.5,
			// 1000 + (1100−1000)·(1 − e^(−0.05)) ≈ 1004.9
			wantR: 1000 + 100*(1-math.Exp(-0.05)), wantAdmitted: 1100, wantArrived: 1100, tolR: 0.01},
		{name: "flood taken at once and seen", before: 50, periods: 40, next: 250, load: 0.6, capEst: 1000,
			wantR: 5000, wantJump: true, wantFlood: true, wantAdmitted: 5000, wantArrived: 5000},
		{name: "a jump to twice the capacity is no flood", before: 50, periods: 40, next: 100, load: 0.6, capEst: 1000,
			wantR: 2000, wantJump: true, wantAdmitted: 2000, wantArrived: 2000},
		{name: "drop taken at once when not overloaded", before: 100, periods: 40, next: 20, load: 0.5,
			wantR: 400, wantJump: true, wantAdmitted: 400, wantArrived: 400},
		{name: "drop smoothed while shedding and overloaded", before: 100, periods: 40, next: 20, load: 1.3, shedding: true,
			wantR: 2000 - 1600*(1-math.Exp(-0.05)), wantAdmitted: 400, wantArrived: 400, tolR: 0.01},
		{name: "drop smoothed while shedding and behind on reading", before: 100, periods: 40, next: 0, load: 0.85, shedding: true, behind: true,
			wantR: 2000 - 2000*(1-math.Exp(-0.05)), wantAdmitted: 0, wantArrived: 0, tolR: 0.01},
		{name: "drop taken at once while shedding below target, keeping up", before: 100, periods: 40, next: 20, load: 0.85, shedding: true,
			wantR: 400, wantJump: true, wantAdmitted: 400, wantArrived: 400},
		{name: "deadline and quota rejections are not eligible; overload ones are not admitted", next: 50,
			rejected: [3]uint64{5, 5, 10}, wantR: 800, wantJump: true, wantAdmitted: 600, wantArrived: 1000},
	}
	for _, tt := range tests {
		var m meter
		var c counts
		for range tt.periods {
			c = countsAfter(c, levee.Critical, tt.before, 0, 0, 0)
			m.step(meterIn{counts: c, dt: testDt, load: tt.load, shedding: tt.shedding})
		}
		c = countsAfter(c, levee.Critical, tt.next, tt.rejected[0], tt.rejected[1], tt.rejected[2])
		out := m.step(meterIn{counts: c, dt: testDt, load: tt.load, shedding: tt.shedding, capEst: tt.capEst, capCeil: tt.capEst, behind: tt.behind})
		if math.Abs(out.R-tt.wantR) > tt.tolR+1e-6 {
			t.Errorf("%s: R = %.3f/s, want %.3f/s", tt.name, out.R, tt.wantR)
		}
		if out.jump != tt.wantJump || out.flood != tt.wantFlood {
			t.Errorf("%s: jump %v flood %v, want %v %v", tt.name, out.jump, out.flood, tt.wantJump, tt.wantFlood)
		}
		if math.Abs(out.admitted-tt.wantAdmitted) > 1e-6 || math.Abs(out.arrived-tt.wantArrived) > 1e-6 {
			t.Errorf("%s: admitted %.1f/s arrived %.1f/s, want %.1f %.1f", tt.name, out.admitted, out.arrived, tt.wantAdmitted, tt.wantArrived)
		}
		if got := out.mix[levee.Critical.Rank()]; math.Abs(got-out.R) > 1e-6 {
			t.Errorf("%s: mix puts %.1f/s in CRITICAL's rank, want all of R = %.1f/s", tt.name, got, out.R)
		}
	}
}

// TestMeterUnread: the change of the demand waiting unread (signals.go's
// backlog) counts as arrivals while overloaded: when it arrives, not
// again when it is read. Each case runs 40 periods of 20 CRITICAL
// arrivals (400/s) with the unread count at 0, then one period per entry
// of unread (the count at its Step) with counted arrivals each.
func TestMeterUnread(t *testing.T) {
	tests := []struct {
		name     string
		load     float64
		shedding bool
		unread   []float64
		counted  []uint64
		wantR    float64 // at the last Step, requests/s
		tolR     float64
	}{
		{name: "demand piling up unread is counted once it holds two Steps", load: 1.3,
			unread: []float64{60, 120}, counted: []uint64{20, 20},
			// 20 counted + 60 more waiting, in 50 ms: 1,600/s, a jump taken at once.
			wantR: 1600},
		{name: "a backlog read at once is not counted again", load: 1.3, shedding: true,
			unread: []float64{200, 200, 100}, counted: []uint64{20, 20, 120},
			// The first Step adds nothing yet, the second the 200 (taken at
			// once), the third 120 read less 100 no longer waiting: 20.
			wantR: 400 + (4400-400)*math.Exp(-0.05), tolR: 0.01},
		{name: "without the count the same backlog reads as a flood", load: 1.3, shedding: true,
			unread: []float64{nan, nan, nan}, counted: []uint64{20, 20, 120},
			wantR: 2400},
		{name: "goroutines that come and go within a period add nothing", load: 1.3, shedding: true,
			unread: []float64{100, 0}, counted: []uint64{20, 20}, wantR: 400},
		{name: "below target the count is noise", load: 0.6,
			unread: []float64{60, 120}, counted: []uint64{20, 20}, wantR: 400},
	}
	for _, tt := range tests {
		var m meter
		var c counts
		for range 40 {
			c = countsAfter(c, levee.Critical, 20, 0, 0, 0)
			m.step(meterIn{counts: c, dt: testDt, load: tt.load, shedding: tt.shedding})
		}
		var out meterOut
		for i, u := range tt.unread {
			c = countsAfter(c, levee.Critical, tt.counted[i], 0, 0, 0)
			out = m.step(meterIn{counts: c, dt: testDt, load: tt.load, shedding: tt.shedding, unread: u})
		}
		if math.Abs(out.R-tt.wantR) > tt.tolR+1e-6 {
			t.Errorf("%s: R = %.3f/s, want %.3f/s", tt.name, out.R, tt.wantR)
		}
	}
}

var nan = math.NaN()

func TestRetryShareStep(t *testing.T) {
	tests := []struct {
		name        string
		share       float64 // retried share of 1000 arrivals/s, held 20 s
		startNoRetr bool
		want        bool
	}{
		{"low share", 0.05, false, false},
		{"above twice the budget", 0.3, false, true},
		{"inside the hysteresis band keeps no-retry on", 0.19, true, true},
		{"inside the hysteresis band keeps it off", 0.19, false, false},
		{"below the band turns it off", 0.1, true, false},
	}
	for _, tt := range tests {
		s := retryShare{noRetry: tt.startNoRetr}
		var retried uint64
		var share float64
		var noRetry bool
		for i := range 400 {
			retried = uint64(float64(i+1) * 50 * tt.share)
			share, noRetry = s.step(retried, 1000, testDt)
		}
		if noRetry != tt.want {
			t.Errorf("%s: share %.3f, noRetry %v, want %v", tt.name, share, noRetry, tt.want)
		}
		if math.Abs(share-tt.share) > 0.01 {
			t.Errorf("%s: share %.3f, want %.3f", tt.name, share, tt.share)
		}
	}
}

func TestEpisodesStep(t *testing.T) {
	const s = int64(time.Second)
	tests := []struct {
		name string
		ep   episodes
		in   episodeIn
		want time.Duration
	}{
		{"no episode yet: the default", newEpisodes(), episodeIn{now: 10 * s}, defaultRecovery},
		{"first episode sets the advice", newEpisodes(), episodeIn{now: 10 * s, ended: true, epLen: 3 * time.Second, period: 50 * time.Millisecond}, 3050 * time.Millisecond},
		{"later episodes are averaged", episodes{recovery: 4 * time.Second, n: 3}, episodeIn{now: 10 * s, ended: true, epLen: 2 * time.Second}, 3 * time.Second},
		{"a longer current episode raises it", episodes{recovery: time.Second, n: 1}, episodeIn{now: 10 * s, shedding: true, epStart: 4 * s}, 6 * time.Second},
		{"at least minRetryAfter", episodes{recovery: time.Millisecond, n: 1}, episodeIn{now: 10 * s}, minRetryAfter},
		{"at most maxRetryAfter", episodes{recovery: time.Hour, n: 1}, episodeIn{now: 10 * s}, maxRetryAfter},
	}
	for _, tt := range tests {
		if got := tt.ep.step(tt.in); got != tt.want {
			t.Errorf("%s: Retry-After %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestRunBoundGrowthStops: requests that wait while the signals are at
// rest grow the bound to what they need and no further. It grew a quarter
// a period whenever anyone waited — also with free slots (a waiter that
// stays, a hand-over in progress) — reached +Inf within minutes, the
// learned mean became NaN, and the run queue was unbounded for good.
func TestRunBoundGrowthStops(t *testing.T) {
	const want = 50 // requests that want a slot at once (a slow dependency)
	b := runBound{mean: 4, limit: 8, floor: 4}
	var got int64
	for range 20 * 3600 { // an hour of 50 ms periods
		running := min(want, int64(b.limit))
		got = b.step(runIn{period: testDt, counting: true, running: running, waiting: want - running, load: 0.3, degraded: true})
	}
	if got < want || got > 2*want || math.IsNaN(b.mean) {
		t.Errorf("bound %d (mean %v) after an hour with %d requests wanting a slot; want between %d and %d", got, b.mean, want, want, 2*want)
	}
	// A waiter that stays while slots are free.
	b = runBound{mean: 4, limit: 8, floor: 4}
	for range 20 * 3600 {
		got = b.step(runIn{period: testDt, counting: true, running: 3, waiting: 1, load: 0.3, degraded: true})
	}
	if got != 8 || math.IsNaN(b.mean) {
		t.Errorf("bound %d (mean %v) after an hour with a waiter beside free slots; want 8", got, b.mean)
	}
}

// TestRunBoundNeedLiftBounded: requests waiting with room for minutes
// while no need is known leave no lift behind, and the bound does not
// grow beside free slots: the need, once known, binds at once.
func TestRunBoundNeedLiftBounded(t *testing.T) {
	b := runBound{mean: 10, limit: 20, floor: 4, procs: 1}
	for range 10000 { // 500 s of periods ×1.25 would overflow a float
		b.step(runIn{period: testDt, counting: true, running: 2, waiting: 3, load: 0.7})
	}
	if b.needMul != 1 {
		t.Fatalf("lift %v after waiting with room and no need known, want 1", b.needMul)
	}
	// The bound itself does not grow beside free slots
	// (TestRunBoundGrowthStops).
	if b.limit > 20 || b.mean != b.mean {
		t.Fatalf("after 500 s waiting beside free slots: limit %v, mean %v; want ≤ 20 and a number", b.limit, b.mean)
	}
	if got := b.step(runIn{period: testDt, load: 1.5, shedding: true, need: 0.9}); got != 2 {
		t.Errorf("bound %d once the need (0.9 on one core) is known, want 2", got)
	}
}

func TestRunBoundStep(t *testing.T) {
	tests := []struct {
		name string
		b    runBound
		in   runIn
		want int64
	}{
		{"idle: off", runBound{floor: 4}, runIn{period: testDt, load: 0.3}, runOff},
		{"busy, nothing learned: counting", runBound{floor: 4}, runIn{period: testDt, load: 0.6}, runCount},
		{"busy and counting: learns 2 × running ÷ load", runBound{floor: 4}, runIn{period: testDt, counting: true, running: 9, load: 0.9}, 20},
		{"never below the floor", runBound{floor: 8}, runIn{period: testDt, counting: true, running: 1, load: 0.5}, 8},
		{"shedding: keeps the bound, learns nothing", runBound{mean: 10, limit: 20, floor: 4}, runIn{period: testDt, counting: true, running: 50, load: 1.5, shedding: true}, 20},
		{"waiting at a full bound with room: grows a quarter", runBound{mean: 10, limit: 20, floor: 4}, runIn{period: testDt, running: 20, waiting: 9, load: 0.7}, 25},
		{"waiting with room: grows to the requests present at most", runBound{mean: 10, limit: 20, floor: 4}, runIn{period: testDt, running: 20, waiting: 2, load: 0.7}, 22},
		{"waiting with free slots (a hand-over in progress): holds", runBound{mean: 10, limit: 20, floor: 4}, runIn{period: testDt, running: 7, waiting: 3, load: 0.7}, 20},
		{"degraded below half the target: on", runBound{mean: 10, limit: 20, floor: 4}, runIn{period: testDt, load: 0.3, degraded: true}, 20},
		// The capacity's need (capacity × solo service time) caps the
		// bound at twice the need, never below the cores.
		{"CPU-bound on one core: need 0.9 caps 20 at 2", runBound{mean: 10, limit: 20, floor: 4, procs: 1}, runIn{period: testDt, load: 1.5, shedding: true, need: 0.9}, 2},
		{"CPU-bound on one core: need 0.4 still leaves the core", runBound{mean: 10, limit: 20, floor: 4, procs: 1}, runIn{period: testDt, load: 1.5, shedding: true, need: 0.4}, 1},
		{"CPU-bound on 64 cores: need 60 caps 200 at 120", runBound{mean: 100, limit: 200, floor: 128, procs: 64}, runIn{period: testDt, load: 1.5, shedding: true, need: 60}, 120},
		{"waiting on a dependency: a need of 8 on one core does not cap", runBound{mean: 30, limit: 60, floor: 4, procs: 1}, runIn{period: testDt, load: 1.5, shedding: true, need: 8}, 60},
		{"the need never raises the bound", runBound{mean: 10, limit: 20, floor: 4, procs: 1}, runIn{period: testDt, load: 1.5, shedding: true, need: 250}, 20},
		{"waiting with room at the need's full bound lifts it a quarter", runBound{mean: 10, limit: 20, floor: 4, procs: 2, last: 8}, runIn{period: testDt, counting: true, running: 8, waiting: 3, load: 0.7, need: 4}, 10},
		{"waiting with room beside free slots does not lift the need", runBound{mean: 10, limit: 20, floor: 4, procs: 2, last: 8}, runIn{period: testDt, counting: true, running: 2, waiting: 3, load: 0.7, need: 4}, 8},
		{"nothing learned yet: the need alone does not bound", runBound{floor: 4, procs: 1}, runIn{period: testDt, load: 1.5, shedding: true, need: 0.9}, runCount},
	}
	for _, tt := range tests {
		if got := tt.b.step(tt.in); got != tt.want {
			t.Errorf("%s: bound %d, want %d", tt.name, got, tt.want)
		}
	}
}

// lawAt steps a law through loads (one a period) at R requests/s offered
// and admitted (admit everything: the law's input, not its output), and
// returns the final state and output.
func lawAt(s law, loads []float64, R float64, degraded bool) (law, lawOut) {
	var out lawOut
	for i, l := range loads {
		adm := R
		if s.shedding {
			adm = min(R, out.aim-out.drain)
		}
		s, out = s.step(lawIn{now: int64(i) * int64(50*time.Millisecond), dt: testDt, load: l, prop: l, over: l > 1, R: R, admRate: adm, admitted: adm, degraded: degraded})
	}
	return s, out
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestLawStep(t *testing.T) {
	t.Run("learns capacity below target", func(t *testing.T) {
		s, out := lawAt(law{}, repeat(0.5, 100), 500, false)
		if math.Abs(s.capEst-1000) > 1 || out.shed != 0 || s.shedding {
			t.Errorf("capEst %.1f, shed %.1f, shedding %v; want 1000, 0, false", s.capEst, out.shed, s.shedding)
		}
	})
	t.Run("a capacity first learned in an episode is taken whole", func(t *testing.T) {
		// Overloaded from the start (a cold start into a flood): no
		// capacity was learned below target. Once the episode's readings
		// are steady, the estimate is admitted ÷ load at once, not that
		// smoothed up from 0 (which read a tenth of it half a second in).
		s, out := lawAt(law{}, repeat(1.1, 12), 1000, true)
		want := (out.aim - out.drain) / 1.1
		if !s.shedding || s.capEst < 0.8*want {
			t.Errorf("shedding %v, capEst %.0f after 12 periods at load 1.1 admitting %.0f/s, want ≈ %.0f", s.shedding, s.capEst, out.aim-out.drain, want)
		}
	})
	t.Run("a binding bottleneck's throughput is the capacity at entry", func(t *testing.T) {
		// The CPU-bound periods before taught 4000/s; a dependency
		// slowed down and its pool completes 160/s: the episode aims at
		// 160/s and drains what the last periods admitted above it.
		s, _ := lawAt(law{}, repeat(0.25, 100), 1000, false)
		s, out := s.step(lawIn{now: 100 * int64(50*time.Millisecond), dt: testDt, load: 6, prop: 0.2, over: true, R: 1000, admRate: 1000, admitted: 1000,
			degraded: true, bottleneck: 160})
		backlog := 4 * (1000 - 160) * testDt.Seconds() // the last four periods' admissions above 160/s
		if !out.started || math.Abs(s.target-160) > 1e-9 || math.Abs(s.drain-backlog) > 1 || math.Abs(s.capEst-4000) > 10 {
			t.Errorf("started %v target %.0f drain %.1f capEst %.0f, want an episode at 160 draining %.0f, the learned capacity kept", out.started, s.target, s.drain, s.capEst, backlog)
		}
	})
	t.Run("a queue binding beside a busy utilisation enters at the capacity", func(t *testing.T) {
		// The scheduler latency reads 2.5× its target while the CPU
		// reads 0.9 of its own, and the arrivals counted show no flood
		// (a flood read late): the capacity learned before holds; the
		// delay says "over", not by how much. With the CPU far below
		// its target the same delay says the process is not getting
		// the resource it had: the target is cut.
		for _, c := range []struct {
			prop, want float64
		}{{0.9, 1000}, {1.2, 1000 / 1.2}, {0.3, 500}} {
			s, _ := lawAt(law{}, repeat(0.5, 100), 500, false)
			s, out := s.step(lawIn{now: 100 * int64(50*time.Millisecond), dt: testDt, load: 2.5, prop: c.prop, over: true, R: 1000, admRate: 1000, admitted: 1000, degraded: true})
			if !out.started || math.Abs(s.target-c.want) > 1e-6 {
				t.Errorf("prop %.1f: started %v target %.1f, want an episode at %.1f", c.prop, out.started, s.target, c.want)
			}
		}
	})
	t.Run("does not shed before degradation", func(t *testing.T) {
		s, _ := lawAt(law{capEst: 1000}, repeat(1.5, 5), 1500, false)
		if s.shedding {
			t.Error("shedding without a degradation level above 0")
		}
	})
	t.Run("enters at the capacity, drains the backlog, sheds the rest", func(t *testing.T) {
		s, _ := lawAt(law{}, repeat(0.5, 100), 500, false)
		s, out := s.step(lawIn{now: 100 * int64(50*time.Millisecond), dt: testDt, load: 1.5, prop: 1.5, over: true, R: 3000, admRate: 1500, admitted: 1500, degraded: true})
		if !out.started || !s.shedding {
			t.Fatalf("started %v shedding %v, want an episode", out.started, s.shedding)
		}
		// The period admitted 1500/s against a capacity of 1000/s: 25
		// requests of backlog, drained over drainTime (250 ms) by
		// shedding 100/s more than the capacity needs.
		if math.Abs(s.target-1000) > 1 || math.Abs(s.drain-25) > 1e-6 || math.Abs(out.aim-1000) > 1e-6 || math.Abs(out.shed-2000) > 1e-6 || math.Abs(out.drain-100) > 1e-6 {
			t.Errorf("target %.1f drain %.1f aim %.1f shed %.1f drain rate %.1f, want 1000, 25, 1000, 2000, 100", s.target, s.drain, out.aim, out.shed, out.drain)
		}
	})
	t.Run("does not enter without the signals' verdict", func(t *testing.T) {
		// A CPU over its target with nothing waiting (signals.go): load
		// 1.05, over false.
		s := law{capEst: 1000}
		s, out := s.step(lawIn{now: 0, dt: testDt, load: 1.05, prop: 1.05, R: 1100, admRate: 1050, admitted: 1050, degraded: true})
		if s.shedding || out.shed != 0 {
			t.Errorf("shedding %v, shed %.0f with load 1.05 not confirmed, want none", s.shedding, out.shed)
		}
	})
	t.Run("never cuts below target", func(t *testing.T) {
		s := law{capEst: 1000, shedding: true, target: 800, corr: 1, admCnt: [2]float64{40, 40}, prevLoad: 0.8}
		s2, _ := s.step(lawIn{dt: testDt, load: 0.8, prop: 0.8, R: 3000, admRate: 800, admitted: 800})
		if s2.target < s.target {
			t.Errorf("target cut from %.1f to %.1f at load 0.8", s.target, s2.target)
		}
	})
	t.Run("cuts above target", func(t *testing.T) {
		s := law{capEst: 1000, shedding: true, target: 1000, corr: 1, admCnt: [2]float64{50, 50}, prevLoad: 1.25}
		s2, _ := s.step(lawIn{dt: testDt, load: 1.25, prop: 1.25, R: 3000, admRate: 1000, admitted: 1000})
		if s2.target >= s.target {
			t.Errorf("target %.1f → %.1f at load 1.25, want a cut", s.target, s2.target)
		}
	})
	t.Run("a queue's delay falling holds the target; rising, for spikeHold periods; a bottleneck's cuts", func(t *testing.T) {
		// A delay binds (scheduler latency at 2.5× its target, the CPU at
		// 0.8 of its own): after a cut the backlog drains and the
		// reading falls, 3 → 2.5. Cut again for it, the target would
		// fall below the capacity once the queue is gone.
		s := law{capEst: 1000, shedding: true, target: 600, corr: 1, admCnt: [2]float64{30, 30}, prevLoad: 2, lastLoad: 3}
		in := lawIn{dt: testDt, load: 2.5, prop: 0.8, R: 3000, admRate: 600, admitted: 600}
		if s2, _ := s.step(in); s2.target != s.target {
			t.Errorf("falling queue delay: target %.1f → %.1f, want it held", s.target, s2.target)
		}
		// Rising with the CPU below its target: a burst read at once, held
		// for spikeHold periods; one that lasts is cut.
		rising := in
		rising.load = 3.5
		r := s
		for p := range spikeHold {
			next, _ := r.step(rising)
			if next.target != r.target {
				t.Fatalf("rising queue delay, the CPU at 0.8, period %d: target %.1f → %.1f, want it held", p+1, r.target, next.target)
			}
			r = next
		}
		if s2, _ := r.step(rising); s2.target >= r.target {
			t.Errorf("rising queue delay for %d periods: target %.1f → %.1f, want a cut", spikeHold+1, r.target, s2.target)
		}
		risingBusy := rising
		risingBusy.prop = 1.05
		if s2, _ := s.step(risingBusy); s2.target >= s.target {
			t.Errorf("rising queue delay, the CPU over its target: target %.1f → %.1f, want a cut", s.target, s2.target)
		}
		pool := in
		pool.bottleneck = 160
		if s2, _ := s.step(pool); s2.target >= s.target {
			t.Errorf("a dependency's delay falling: target %.1f → %.1f, want a cut (the capacity fell)", s.target, s2.target)
		}
		busy := in
		busy.prop = 2.4
		if s2, _ := s.step(busy); s2.target >= s.target {
			t.Errorf("falling delay with the CPU as far over: target %.1f → %.1f, want a cut by the utilisation", s.target, s2.target)
		}
	})
	t.Run("an idle process climbs fast with too little admitted to estimate from", func(t *testing.T) {
		// An I/O-bound service reads a few per cent of its CPU at full
		// throughput (load 0.03 at 50 requests/s): the estimate's case
		// does not apply and the fallback rises 23 % a period. Once idle
		// for longer than the lag it climbs at fastRise, as the estimate
		// does: from a target cut to the floor (1e-3, a stall that let
		// nothing through) to the 50/s arriving within 30 periods, where
		// the fallback alone took 52 (the files lab).
		s := law{shedding: true, target: 1e-3, corr: 1}
		periods := 0
		for ; periods < 100 && s.target < 50; periods++ {
			adm := min(s.target, 50)
			s, _ = s.step(lawIn{now: int64(periods) * int64(testDt), dt: testDt, load: 0.03, prop: 0.03, R: 50, admRate: adm, admitted: adm})
		}
		if periods > 30 {
			t.Errorf("idle at load 0.03: %d periods to climb from 1e-3 to 50/s, want ≤ 30", periods)
		}
	})
	t.Run("episode ends after the hold with nothing to shed", func(t *testing.T) {
		hold := int64(episodeHold)
		s := law{capEst: 1000, shedding: true, target: 1000, corr: 1, epStart: 0, lastShed: 2 * int64(time.Second)}
		s2, out := s.step(lawIn{now: 2*int64(time.Second) + hold, dt: testDt, load: 0.5, prop: 0.5, R: 500, admRate: 500, admitted: 500})
		if !out.ended || s2.shedding || out.epLen != 2*time.Second {
			t.Errorf("ended %v shedding %v epLen %v, want true false 2s", out.ended, s2.shedding, out.epLen)
		}
	})
}

func TestCombineSignals(t *testing.T) {
	nan := math.NaN()
	cpu := func(v float64) SignalState { return SignalState{Name: "cpu", Value: v, Target: 0.95} }
	queue := func(v float64) SignalState { return SignalState{Name: "queue_delay", Value: v, Target: 0.010} }
	sched := func(v float64) SignalState { return SignalState{Name: "sched_latency", Value: v, Target: 0.050} }
	// Each case steps a combiner through `periods` periods of the same
	// states and checks the verdict after each.
	tests := []struct {
		name     string
		states   []SignalState
		util     []bool
		periods  int
		wantLoad float64
		wantOver []bool // per period
	}{
		{"CPU over its target, nothing waits: busy, not overloaded (until it persists 2 s)", []SignalState{cpu(0.97), queue(0.001), sched(0.002)}, []bool{true, false, false}, utilPersist + 1, 0.97 / 0.95,
			append(make([]bool, utilPersist), true)},
		{"CPU over its target and a queue at three quarters of its target: overloaded from the 2nd period", []SignalState{cpu(0.97), queue(0.0075), sched(0.002)}, []bool{true, false, false}, 3, 0.97 / 0.95,
			[]bool{false, true, true}},
		{"CPU over its target and a queue at half its target: busy, work served in time", []SignalState{cpu(0.97), queue(0.005), sched(0.002)}, []bool{true, false, false}, 3, 0.97 / 0.95,
			[]bool{false, false, false}},
		{"CPU over its target for 2 s with a queue in sight and short: no safety net", []SignalState{cpu(0.97), queue(0.003), sched(0.002)}, []bool{true, false, false}, utilPersist + 5, 0.97 / 0.95,
			make([]bool, utilPersist+5)},
		{"CPU alone, no delay signal: over its target is overload from the 2nd period", []SignalState{cpu(0.97)}, []bool{true}, 2, 0.97 / 0.95, []bool{false, true}},
		{"a queue over its target, CPU low (a slow dependency): overloaded", []SignalState{cpu(0.2), queue(0.030)}, []bool{true, false}, 2, 3, []bool{true, true}},
		{"a delay signal without a reading confirms nothing, and is not asked", []SignalState{cpu(0.97), queue(nan)}, []bool{true, false}, 2, 0.97 / 0.95, []bool{false, true}},
		{"everything below target", []SignalState{cpu(0.5), queue(0.004)}, []bool{true, false}, 12, 0.5 / 0.95, make([]bool, 12)},
		{"no reading at all", []SignalState{cpu(nan), queue(nan)}, []bool{true, false}, 2, 0, []bool{false, false}},
		{"an infinite delay counts as far over", []SignalState{queue(math.Inf(1))}, []bool{false}, 2, 100, []bool{true, true}},
	}
	for _, tt := range tests {
		c := newCombiner(nil, tt.util, 0)
		for p := range tt.periods {
			got := c.step(tt.states)
			if math.Abs(got.load-tt.wantLoad) > 1e-9 || got.over != tt.wantOver[p] {
				t.Errorf("%s: period %d: load %.4f over %v, want %.4f %v", tt.name, p+1, got.load, got.over, tt.wantLoad, tt.wantOver[p])
			}
		}
	}
}

// TestMeterFloodConfirmed: a flood is seen in the period its count jumps
// and confirmed in the next only by that period's own count. A 64-core
// server of 1 s requests at 0.95 of its capacity (60/s: 3 a 50 ms period)
// counts 11 in one period by chance every few minutes; the smoothed rate,
// taken up at once, then stayed above the flood's bar for the next period
// and an episode was entered on nothing.
func TestMeterFloodConfirmed(t *testing.T) {
	for _, tt := range []struct {
		name       string
		before     uint64 // a period, warming
		jump, next uint64 // the jump's period, then the next
		capEst     float64
		wantFlood  [2]bool
	}{
		{"one period's chance count: seen, not confirmed", 3, 11, 3, 62, [2]bool{true, false}},
		{"a flood that goes on: confirmed", 3, 11, 12, 62, [2]bool{true, true}},
		{"a 5× flood of 1 ms requests, read at half the rate the next period: confirmed", 50, 250, 120, 1000, [2]bool{true, true}},
		{"back to the rate before: not confirmed", 50, 250, 50, 1000, [2]bool{true, false}},
		{"a 1.5× step from 0.6, its first period counted high: not confirmed", 30, 110, 75, 1000, [2]bool{true, false}},
		{"a 3× flood from 0.6: confirmed", 30, 150, 150, 1000, [2]bool{true, true}},
	} {
		var m meter
		var c counts
		step := func(n uint64) meterOut {
			c = countsAfter(c, levee.Critical, n, 0, 0, 0)
			return m.step(meterIn{counts: c, dt: testDt, load: 0.9, capEst: tt.capEst, capCeil: tt.capEst})
		}
		for range 40 {
			step(tt.before)
		}
		a, b := step(tt.jump), step(tt.next)
		if a.flood != tt.wantFlood[0] || b.flood != tt.wantFlood[1] || b.wasFlood != a.flood {
			t.Errorf("%s: flood %v then %v (was %v), want %v", tt.name, a.flood, b.flood, b.wasFlood, tt.wantFlood)
		}
	}
}

// periodSignal is a fixed reading sampled every period.
type periodSignal struct {
	name          string
	value, target float64
	period        time.Duration
}

func (s periodSignal) Name() string          { return s.name }
func (s periodSignal) Value() float64        { return s.value }
func (s periodSignal) Target() float64       { return s.target }
func (s periodSignal) Period() time.Duration { return s.period }
func (s periodSignal) state() SignalState {
	return SignalState{Name: s.name, Value: s.value, Target: s.target}
}

// TestCombineReadingsNotPeriods: a utilisation's verdict, confirmed by a
// delay signal that samples every 100 ms, holds for two of its readings,
// not two 50 ms control periods (which one reading spans), and for two
// periods when every signal samples at the control period.
func TestCombineReadingsNotPeriods(t *testing.T) {
	cpu := periodSignal{name: "cpu", value: 0.97, target: 0.95, period: 50 * time.Millisecond}
	for _, tt := range []struct {
		name       string
		queueEvery time.Duration
		ctrl       time.Duration
		firstOver  int // 1-based period of the first verdict "over"
	}{
		{"queue every 100 ms, control every 50 ms", 100 * time.Millisecond, 50 * time.Millisecond, 4},
		{"queue every 50 ms, control every 50 ms", 50 * time.Millisecond, 50 * time.Millisecond, 2},
		{"queue every 100 ms, control every 20 ms", 100 * time.Millisecond, 20 * time.Millisecond, 10},
		{"queue every 100 ms, control every 1 s", 100 * time.Millisecond, time.Second, 2},
	} {
		q := periodSignal{name: "queue_delay", value: 0.008, target: 0.010, period: tt.queueEvery}
		c := newCombiner([]levee.Signal{cpu, q}, []bool{true, false}, tt.ctrl)
		for p := 1; p <= tt.firstOver+1; p++ {
			got := c.step([]SignalState{cpu.state(), q.state()})
			if want := p >= tt.firstOver; got.over != want {
				t.Errorf("%s: period %d: over %v, want %v", tt.name, p, got.over, want)
			}
		}
	}
}

// TestCapacityFloorAndCeiling: a process that spends a share of its
// target whatever it serves (idle, up to idleMax) reads load l = idle +
// (1−idle)·r/C at an admitted rate r. What the law learns at any load
// must keep the capacity C between its floor and its ceiling, also when
// readings at light load and near the target are blended.
func TestCapacityFloorAndCeiling(t *testing.T) {
	const c = 1000.0
	read := func(idle, r float64) float64 { return idle + (1-idle)*r/c }
	for _, idle := range []float64{0, 0.05, 0.1, 0.15} {
		for _, phases := range [][]float64{{0.2}, {0.5}, {0.95}, {0.2, 0.9}, {0.9, 0.2}, {0.3, 0.6, 0.25}} {
			var s law
			for _, share := range phases {
				for range 40 { // 2 s of 50 ms periods
					r := share * c
					l := read(idle, r)
					if l <= learnLoad {
						continue
					}
					s = s.learnCapacity(r/l, l, smooth.Alpha(testDt, capTau))
					if s.capEst > c*(1+1e-9) || s.capCeil() < c*(1-1e-9) {
						t.Fatalf("idle %.2f, phases %v, at %.2f×: floor %.1f, ceiling %.1f; want the capacity %.0f between them",
							idle, phases, share, s.capEst, s.capCeil(), c)
					}
				}
			}
			t.Logf("idle %.2f, phases %v: floor %.0f, ceiling %.0f", idle, phases, s.capEst, s.capCeil())
		}
	}
	// Near the target the two meet.
	s := law{}.learnCapacity(950/0.95, 0.95, 1)
	if got := s.capCeil() / s.capEst; got > 1.01 {
		t.Errorf("learned at 0.95: ceiling %.3f × the floor, want ≤ 1.01", got)
	}
}
