package pressure

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// spreadRun feeds s perPeriod handler times a 50 ms period for d, drawn
// by draw, and samples it each period (frozen when frozen).
func spreadRun(s *spread, d time.Duration, perPeriod int, draw func() time.Duration, frozen bool) {
	const period = 50 * time.Millisecond
	for range d / period {
		var s1, s2 float64
		for range perPeriod {
			x := draw().Seconds()
			s1 += x
			s2 += x * x
		}
		s.sample(int64(perPeriod), s1, s2, period, frozen)
	}
}

// TestSpreadLearned: the squared coefficient of variation of the handler
// time is learned for constant, exponential and lognormal times, and
// the queue target's factor follows: 1 for the first two, (1 + cv²) ÷ 2
// for the heavy-tailed one.
func TestSpreadLearned(t *testing.T) {
	const ms = time.Millisecond
	rng := rand.New(rand.NewPCG(1, 2))
	lognormal := func(mean time.Duration, cv float64) func() time.Duration {
		s2 := math.Log(1 + cv*cv)
		return func() time.Duration {
			return time.Duration(float64(mean) * math.Exp(math.Sqrt(s2)*rng.NormFloat64()-s2/2))
		}
	}
	tests := []struct {
		name           string
		draw           func() time.Duration
		cv2Lo, cv2Hi   float64
		factLo, factHi float64
	}{
		{"constant", func() time.Duration { return 5 * ms }, 0, 1e-9, 1, 1},
		{"exponential", func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(5*ms)) }, 0.85, 1.15, 1, 1.08},
		// A lognormal's sample cv² converges slowly (its fourth moment is
		// huge): within a factor of two of 9 after 20 s of 50,000 a second.
		{"lognormal, cv 3", lognormal(ms, 3), 4.5, 18, 2.75, 9.5},
	}
	for _, tt := range tests {
		var s spread
		if got := s.cv2.load(); got != 0 {
			t.Fatalf("%s: cv² %v before any request; want 0", tt.name, got)
		}
		spreadRun(&s, 20*time.Second, 2500, tt.draw, false)
		cv2 := s.cv2.load()
		f := spreadFactor(cv2)
		t.Logf("%s: cv² %.3f, factor %.3f", tt.name, cv2, f)
		if cv2 < tt.cv2Lo || cv2 > tt.cv2Hi || f < tt.factLo || f > tt.factHi {
			t.Errorf("%s: cv² %.3f (want [%v, %v]), factor %.3f (want [%v, %v])", tt.name, cv2, tt.cv2Lo, tt.cv2Hi, f, tt.factLo, tt.factHi)
		}
	}
}

// TestSpreadFactorBounds: the factor is never below 1 nor above
// spreadFactorMax, whatever the reading.
func TestSpreadFactorBounds(t *testing.T) {
	for _, tc := range []struct{ cv2, want float64 }{
		{math.NaN(), 1}, {-3, 1}, {0, 1}, {1, 1}, {3, 2}, {9, 5}, {31, 16}, {1e9, spreadFactorMax}, {math.Inf(1), spreadFactorMax},
	} {
		if got := spreadFactor(tc.cv2); got != tc.want {
			t.Errorf("spreadFactor(%v) = %v; want %v", tc.cv2, got, tc.want)
		}
	}
}

// TestSpreadFrozenAndHealing: what an overload's latencies would teach is
// not learned while frozen; a caller that makes 2 % of the requests 100
// times slower for 5 s raises the factor to at most spreadFactorMax, and
// once it stops the factor falls back near 1 by itself within 45 s.
func TestSpreadFrozenAndHealing(t *testing.T) {
	const ms = time.Millisecond
	rng := rand.New(rand.NewPCG(3, 4))
	exp := func() time.Duration { return time.Duration(rng.ExpFloat64() * float64(5*ms)) }
	var s spread
	spreadRun(&s, 10*time.Second, 100, exp, false)
	base := s.cv2.load()

	n := 0
	slow := func() time.Duration {
		n++
		if n%50 == 0 {
			return 500 * ms
		}
		return exp()
	}
	spreadRun(&s, 5*time.Second, 100, slow, true)
	if got := s.cv2.load(); got != base {
		t.Errorf("frozen: cv² moved from %.3f to %.3f", base, got)
	}

	spreadRun(&s, 5*time.Second, 100, slow, false)
	raised := s.cv2.load()
	if f := spreadFactor(raised); f <= 2 || f > spreadFactorMax {
		t.Errorf("2%% of requests 100× slower for 5 s: factor %.2f (cv² %.1f); want in (2, %v]", f, raised, spreadFactorMax)
	}
	// E[d²] was a hundred times its own: e^-9 of that is left after 9 τ.
	spreadRun(&s, 45*time.Second, 100, exp, false)
	healed := s.cv2.load()
	t.Logf("cv² %.2f, %.1f with the slow requests, %.2f 45 s after they stopped", base, raised, healed)
	if f := spreadFactor(healed); f > 1.1 {
		t.Errorf("45 s after the slow requests stopped: factor %.2f (cv² %.2f); want ≤ 1.1", f, healed)
	}
}

// TestConcurrencyVariability: the concurrency signal learns the spread of
// the handler times DoneAt reports (without the excluded part), not while
// the controller sheds, and the queue-delay signal Default wires to it
// scales its target with it.
func TestConcurrencyVariability(t *testing.T) {
	const ms = time.Millisecond
	set, err := Default(WithCPUOptions(WithCgroupFS(nil), WithProcessCPU(func() (time.Duration, error) { return 0, nil })))
	if err != nil {
		t.Fatal(err)
	}
	c := set.Concurrency
	rng := rand.New(rand.NewPCG(5, 6))
	s2 := math.Log(1 + 3*3)
	now := t0
	feed := func(d time.Duration) {
		for range d / (50 * ms) {
			for range 100 {
				x := time.Duration(float64(ms) * math.Exp(math.Sqrt(s2)*rng.NormFloat64()-s2/2))
				st := c.StartAt(now, 0)
				// 20 ms of it held by the caller (a slow upload): not
				// service time, and constant, so it would hide the spread.
				c.DoneAt(st, now.Add(x+20*ms), 20*ms)
			}
			now = now.Add(50 * ms)
			c.SampleAt(now)
			set.Queue.SampleAt(now)
		}
	}
	c.SetShedding(true)
	feed(2 * time.Second)
	if v := c.Variability(); v != 0 {
		t.Errorf("learned %.2f while the controller shed; want nothing (0)", v)
	}
	c.SetShedding(false)
	feed(20 * time.Second)
	v := c.Variability()
	if v < 3 || v > 20 {
		t.Errorf("lognormal handler times with cv 3: Variability %.2f; want about 9", v)
	}
	if r := set.Queue.Reading(); r.Spread != spreadFactor(v) {
		t.Errorf("queue reading's spread %.3f; want %.3f from Variability %.2f", r.Spread, spreadFactor(v), v)
	}
}
