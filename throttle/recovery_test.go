package throttle

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// stage is a stretch of a recovery scenario: the client offers
// load×capacity requests a second, and the backend (a token bucket of that
// capacity) either serves or, down, answers every request "overloaded".
type stage struct {
	d    time.Duration
	load float64
	down bool
}

// driveOpts: Poisson arrivals drawn from seed (else evenly spaced),
// outcomes reported lat after the send, a backend of capacity requests a
// second (0: 100).
type driveOpts struct {
	poisson  bool
	seed     uint64
	lat      time.Duration
	capacity float64
}

// drive runs th through the stages on virtual time and returns the local
// rejection share of every second of the last stage.
func drive(th *Throttle, stages []stage, o driveOpts) []float64 {
	if o.capacity == 0 {
		o.capacity = 100
	}
	rng := rand.New(rand.NewPCG(o.seed, 0x7e57))
	b := newBucket(o.capacity, time.Second)
	type outcome struct {
		at time.Duration
		ok bool
	}
	var pending []outcome
	var out []float64
	at := time.Duration(0)
	for i, s := range stages {
		end := at + s.d
		last := i == len(stages)-1
		gap := time.Duration(float64(time.Second) / (s.load * o.capacity))
		var off, rej float64
		sec := at + time.Second
		for ; at < end; at += gap {
			if o.poisson {
				gap = time.Duration(rng.ExpFloat64() * float64(time.Second) / (s.load * o.capacity))
			}
			for len(pending) > 0 && pending[0].at <= at {
				th.DoneAt(t0.Add(pending[0].at), levee.Critical, pending[0].ok)
				pending = pending[1:]
			}
			for last && at >= sec {
				out = append(out, rej/max(off, 1))
				off, rej, sec = 0, 0, sec+time.Second
			}
			now := t0.Add(at)
			off++
			if th.AllowAt(now, levee.Critical) != nil {
				rej++
				continue
			}
			ok := !s.down && b.take(at)
			if o.lat == 0 {
				th.DoneAt(now, levee.Critical, ok)
			} else {
				pending = append(pending, outcome{at + o.lat, ok})
			}
		}
		at = end
	}
	return out
}

// firstAbove returns the first second of got (from 2 on) whose local
// rejection share is ≥ limit, or -1.
func firstAbove(got []float64, from int, limit float64) int {
	for s := from; s < len(got); s++ {
		if got[s] >= limit {
			return s
		}
	}
	return -1
}

// TestRecoveryAfterOutage: a client offering the backend's capacity, the
// backend answering "overloaded" to everything for 10 s, 150 s or 30 min,
// then healthy again: from 2 s after the recovery on, fewer than 5% of the
// client's requests are refused locally, for every seed, with and without
// latency. (The plain 2-minute formula needed 93–96 s after 150 s; a
// client refusing nearly all sends about one request a window, so without
// probes it never learns that the backend is back.)
func TestRecoveryAfterOutage(t *testing.T) {
	for _, outage := range []time.Duration{10 * time.Second, 150 * time.Second, 30 * time.Minute} {
		for _, lat := range []time.Duration{0, 100 * time.Millisecond} {
			worst := 0.0
			for seed := range uint64(8) {
				stages := []stage{{60 * time.Second, 1, false}, {outage, 1, true}, {30 * time.Second, 1, false}}
				got := drive(New(WithSeed(seed)), stages, driveOpts{poisson: true, seed: seed, lat: lat})
				if s := firstAbove(got, 2, 0.05); s >= 0 {
					t.Errorf("outage %v, latency %v, seed %d: second %d after recovery refuses %.3f locally, want < 0.05 from second 2 (%.2f)",
						outage, lat, seed, s, got[s], got[:6])
				}
				for _, v := range got[2:] {
					worst = max(worst, v)
				}
			}
			t.Logf("outage %v, latency %v: worst local rejection share from second 2: %.4f", outage, lat, worst)
		}
	}
}

// TestRecoveryFreshClientBadFirstSecond: a new client whose first second
// sees only rejections recovers as fast (it used to refuse 99% for 11–22 s).
func TestRecoveryFreshClientBadFirstSecond(t *testing.T) {
	for seed := range uint64(8) {
		got := drive(New(WithSeed(seed)), []stage{{time.Second, 1, true}, {30 * time.Second, 1, false}}, driveOpts{poisson: true, seed: seed})
		if s := firstAbove(got, 2, 0.05); s >= 0 {
			t.Errorf("seed %d: second %d after the bad first second refuses %.3f locally, want < 0.05 (%.2f)", seed, s, got[s], got[:6])
		}
	}
}

// TestRecoverySpikeWithinTwoSeconds: after a 30 s spike at 3× capacity,
// the client refuses fewer than 5% locally from 2 s after the spike on
// (K = 2), every seed. With K = 1.1 the backend accepted 91% of what it
// got during the spike, so telling its recovery apart takes a longer run
// of accepts: within 4 s.
func TestRecoverySpikeWithinTwoSeconds(t *testing.T) {
	for _, tt := range []struct {
		k      float64
		within int
	}{{2, 2}, {1.1, 4}} {
		worst := 0
		for seed := range uint64(8) {
			got := drive(New(WithK(tt.k), WithSeed(seed)), []stage{{30 * time.Second, 3, false}, {30 * time.Second, 1, false}}, driveOpts{poisson: true, seed: seed})
			if s := firstAbove(got, tt.within, 0.05); s >= 0 {
				t.Errorf("K=%v seed %d: second %d after the spike refuses %.3f locally, want < 0.05 from second %d (%.2f)", tt.k, seed, s, got[s], tt.within, got[:6])
			}
			for s := len(got) - 1; s >= 0; s-- {
				if got[s] >= 0.05 {
					worst = max(worst, s+1)
					break
				}
			}
		}
		t.Logf("K=%v: below 5%% local rejections from second %d after the spike, every seed", tt.k, worst)
	}
}

// TestSteadyStateSeeds: at 10× load the backend receives K·A over seeds
// and arrival patterns, probes and the recovery test notwithstanding:
// 2.00 A ± 5% for K = 2 and 1.10 A ± 3% for K = 1.1.
func TestSteadyStateSeeds(t *testing.T) {
	for _, tt := range []struct {
		k, tol float64
	}{{2, 0.05}, {1.1, 0.03}} {
		lo, hi := math.Inf(1), math.Inf(-1)
		for seed := range uint64(6) {
			for _, poisson := range []bool{false, true} {
				got := Simulate(Scenario{K: tt.k, Load: 10, Seed: seed, Poisson: poisson})
				lo, hi = min(lo, got.Received), max(hi, got.Received)
				if d := got.Received/tt.k - 1; math.Abs(d) > tt.tol {
					t.Errorf("K=%v seed %d poisson %v: backend receives %.4f×A, want %.2f×A ± %.0f%%", tt.k, seed, poisson, got.Received, tt.k, tt.tol*100)
				}
			}
		}
		t.Logf("K=%v: backend receives %.4f–%.4f ×A", tt.k, lo, hi)
	}
}

// TestProbesOnlyWhenNearlyAllRefused: a throttle refusing everything sends
// a probe every 200 ms per criticality while requests come, and one
// refusing less than 95% sends none (the steady state stays the book's).
func TestProbesOnlyWhenNearlyAllRefused(t *testing.T) {
	th := New()
	// A backend that rejects everything: P climbs to ~1.
	var sentLast10s int
	for i := range 60_000 { // 60 s at 1000/s
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if th.AllowAt(now, levee.Sheddable) == nil {
			th.DoneAt(now, levee.Sheddable, false)
			if i >= 50_000 {
				sentLast10s++
			}
		}
	}
	// One probe per probeGap, plus what the formula itself lets through
	// at P = R/(R+1) (about 1 in 1000 here).
	if got, want := sentLast10s, int(10*time.Second/probeGap); got < want-1 || got > want+15 {
		t.Errorf("sent %d in the last 10 s of an outage, want %d probes (one per %v) and about 10 more", got, want, probeGap)
	}
	if p := th.RejectProbabilityAt(t0.Add(time.Minute), levee.Sheddable); p < 0.99 {
		t.Errorf("P = %.3f, want ≥ 0.99", p)
	}
	// At 10× (P ≈ 0.8 < 95%) the formula sends on its own: no probe, the
	// steady state is the book's (TestSteadyStateSeeds).
	got := Simulate(Scenario{Load: 10, Capacity: 3, Seed: 1})
	if d := got.Received/2 - 1; math.Abs(d) > 0.02 {
		t.Errorf("3 accepts/s at 10×: backend receives %.3f×A, want 2×A ± 2%%", got.Received)
	}
}
