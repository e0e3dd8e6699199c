package sim

import (
	"fmt"
	"testing"
	"time"
)

// TestHeavyTail: tiers whose handler times are lognormal with a
// coefficient of variation of 3 or 6 — a heavier tail than the sweep's
// exponential one, as requests that sometimes miss a cache have — shed
// nothing that fits: at 0.8 and 0.9 of capacity levee's goodput is within
// 0.01 of the unprotected tier's, at 0.95 within 0.03 (cv 6: 0.05, its
// queue passes the target's 1 s ceiling now and then, 0.910–0.947 of
// 0.947–0.950), and at 1.2× it keeps ≥ 0.88 of capacity. Such a queue waits about (1 + cv²) ÷ 2 times
// longer than an exponential one at the same load, and the queue-delay
// target is scaled by the spread the concurrency signal learns from the
// handler times (pressure's spread.go). Before it, one core of 1 ms
// requests with cv 3 lost 0.036 of capacity at 0.9 and four of 5 ms with
// cv 6 0.03 at 0.8. The callers' budgets are given per shape: with 200
// service times on one core and cv 3, the budget bounds the target and
// levee still sheds 2–6 % at 0.9 (pressure.QueueDelay's doc).
func TestHeavyTail(t *testing.T) {
	shapes := []sweepShape{
		{1, time.Millisecond, "lognormal", 3, time.Second},
		{4, 5 * time.Millisecond, "lognormal", 6, 5 * time.Second},
		{8, 10 * time.Millisecond, "lognormal", 3, 2 * time.Second},
		{32, 100 * time.Millisecond, "lognormal", 3, 20 * time.Second},
	}
	loads := []float64{0.8, 0.9, 0.95, 1.2}
	if testing.Short() || raceEnabled {
		shapes, loads = shapes[:2], []float64{0.9}
	}
	for _, sh := range shapes {
		for _, load := range loads {
			t.Run(fmt.Sprintf("%s/%g", sh, load), func(t *testing.T) {
				t.Parallel()
				k := max(1, sh.mean.Seconds()/0.01)
				s := sweepScenario(t, sh, load, false, time.Duration(5*k)*time.Second, time.Duration(20*k)*time.Second)
				c := sh.capacity()
				tol95 := 0.03
				if sh.cv > 3 {
					tol95 = 0.05
				}
				for _, seed := range []uint64{1, 2} {
					_, u, l := sweepMeasure(s, seed)
					gu, gl := u.GoodputRPS/c, l.GoodputRPS/c
					line := fmt.Sprintf("seed %d: unprotected %.3f levee %.3f of capacity, rejected %.3f", seed, gu, gl, l.RejectedRPS/c)
					t.Log(line)
					switch {
					case load <= 0.9 && gl < gu-0.01:
						t.Errorf("%s: want levee within 0.01 of unprotected", line)
					case load > 0.9 && load < 1 && gl < gu-tol95:
						t.Errorf("%s: want levee within %g of unprotected", line, tol95)
					case load > 1 && gl < 0.88:
						t.Errorf("%s: want ≥ 0.88 of capacity", line)
					}
				}
			})
		}
	}
}
