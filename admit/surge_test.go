package admit

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"
)

// TestSurgeBeforeDegradation: a batch read at one instant while the server
// is busy but not yet degraded — a flood's first requests, before the
// Step that would see it has run — is bounded once the service time of a
// request running alone is known, by the work the capacity does in two
// periods or in one solo service time, whichever is longer. 1 ms
// requests on one core: a one-core gRPC server at a 5× onset from 0.7 of
// its capacity admitted 426 such calls before its first Step ran, and
// starved its connection readers and its Steps behind them for 0.4 s.
// 1 s requests on about 40 cores (a request every 40 ms at load 0.4): a
// burst of 40 is what the capacity runs at once and doubles their latency
// at most; it must be admitted whole — two periods at twice the capacity
// (4 requests, 18 with the margin) would refuse most of it, as the code
// before did once degraded (21 of 32 at load 0.9). Swept over 100 µs and
// 1 ms requests on one core, 1 ms on about 40 (a request every 40 µs at
// load 0.4) and 1 s on about 40.
func TestSurgeBeforeDegradation(t *testing.T) {
	for _, tc := range []struct {
		d      time.Duration // service time, alone
		gap    time.Duration // between requests while learning (load 0.4)
		load   float64       // then, before the bursts
		level  bool          // the degradation level is up at that load
		fits   float64       // a burst this many × capacity × solo must be admitted whole
		bursts float64       // a burst this many × the bound must not be
	}{
		{d: 100 * time.Microsecond, gap: 250 * time.Microsecond, load: 0.66, fits: 0, bursts: 4},
		{d: time.Millisecond, gap: 2500 * time.Microsecond, load: 0.66, fits: 0, bursts: 4},
		{d: time.Millisecond, gap: 40 * time.Microsecond, load: 0.66, fits: 1, bursts: 4}, // about 40 cores
		{d: time.Second, gap: 40 * time.Millisecond, load: 0.66, fits: 1, bursts: 4},
		{d: time.Second, gap: 40 * time.Millisecond, load: 0.9, level: true, fits: 1, bursts: 4},
	} {
		t.Run(fmt.Sprintf("%v every %v, then load %v", tc.d, tc.gap, tc.load), func(t *testing.T) {
			sig := &constSignal{v: 0.4 * 0.8, target: 0.8}
			c, clk := withFakeClock(WithSignals(sig))
			c.Step(c.timeAt(clk.now()))
			type held struct {
				tk   Ticket
				done int64
			}
			var inFlight []held
			tick := min(tc.d, tc.gap, 10*time.Millisecond)
			next := clk.now()
			wait := true // while learning; busy, the run queue is on, and a test cannot park
			run := func(dur time.Duration) {
				for end := clk.now() + int64(dur); clk.now() < end; clk.advance(tick) {
					kept := inFlight[:0]
					for _, h := range inFlight {
						if h.done <= clk.now() {
							h.tk.Done(nil)
						} else {
							kept = append(kept, h)
						}
					}
					inFlight = kept
					for ; next <= clk.now(); next += int64(tc.gap) {
						tk, err := c.Admit(context.Background())
						if err == nil && wait {
							err = tk.Wait(context.Background())
							if err != nil {
								t.Fatalf("at load 0.4: %v", err)
							}
						}
						if err == nil {
							inFlight = append(inFlight, held{tk, clk.now() + int64(tc.d)})
						}
					}
				}
			}
			run(40 * time.Second)
			solo := c.solo.seconds()
			if math.Abs(solo-tc.d.Seconds()) > 0.05*tc.d.Seconds() {
				t.Fatalf("solo service time %.4fs, want about %v", solo, tc.d)
			}
			sig.v = tc.load * 0.8
			wait = false
			run(2 * time.Second)
			if lvl := c.report.level; (lvl != 0) != tc.level {
				t.Fatalf("degradation level %d at load %v; the case needs it up: %v", lvl, tc.load, tc.level)
			}
			capEst, ceil, period := c.law.capEst, c.law.capCeil(), c.cfg.period.Seconds()
			n := max(surgeFactor*capEst*period, ceil*period, capEst*solo)
			bound := n + 3*math.Sqrt(n) + 8
			burst := func(k int) (admitted int) {
				for range k {
					if tk, err := c.Admit(context.Background()); err == nil {
						admitted++
						inFlight = append(inFlight, held{tk, clk.now() + int64(tc.d)})
					}
				}
				return admitted
			}
			if tc.fits > 0 {
				k := int(tc.fits * capEst * solo)
				if got := burst(k); got != k {
					t.Errorf("capacity %.1f/s, solo %.3fs: admitted %d of a burst of %d, what the capacity runs at once", capEst, solo, got, k)
				}
				run(3 * time.Second) // drain it
			}
			k := int(tc.bursts * bound)
			got := burst(k)
			t.Logf("capacity %.1f/s (ceiling %.1f), solo %.4fs: bound %.0f, admitted %d of a burst of %d", capEst, ceil, solo, bound, got, k)
			// The bound trips at a check (one Admit in surgeEvery); what
			// follows is admitted at the capacity's share of the burst.
			if most := int(bound) + surgeEvery + int(float64(k)*capEst/(float64(k)/period)) + 1; got > most {
				t.Errorf("admitted %d of a burst of %d read at once, want ≤ %d", got, k, most)
			}
		})
	}
}

// TestSurgePlanReused: a bound that did not trip hands its plan, never
// published, to the next period's bound instead of a new allocation each
// Step; one that tripped (its plan published) does not, and a bound
// claimed so can no longer trip.
func TestSurgePlanReused(t *testing.T) {
	var arrived [4]uint64
	arm := func(prev *surge) *surge {
		return armSurge(prev, arrived, 0, 1000, 1200, 100, 0, 0.05, 0.001, false, false)
	}
	a := arm(nil)
	if a == nil {
		t.Fatal("not armed at light load with a solo time known")
	}
	b := arm(a)
	if b.plan != a.plan {
		t.Error("an untripped bound's plan was not reused")
	}
	if a.fired.CompareAndSwap(false, true) {
		t.Error("the bound whose plan was reused can still trip")
	}
	b.fired.Store(true) // tripped: its plan is published
	if c := arm(b); c.plan == b.plan {
		t.Error("a published plan was reused")
	}
}
