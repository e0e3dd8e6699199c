package admit_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// TestControlExpensiveRejections plays the regime of a real one-core HTTP
// server under naive retrying clients: every rejection is retried at once,
// so at 5× the server receives about 15× its capacity in attempts, and a
// rejection costs 4% of a request (40 µs of net/http against 1 ms of
// work). More than half of the CPU then goes to rejecting, and the load no
// longer falls in proportion to what is admitted. The steady state must
// still hold the signal at target and admit what the CPU leaves over (the
// plant's atTarget). It guards the control law in that regime; the
// collapses seen on the loopback harness in it came from the plan and the
// entry (TestSingleTenantFlood, TestStallInFlood), which this plant alone
// does not reproduce.
func TestControlExpensiveRejections(t *testing.T) {
	const c0 = 1000.0
	for _, offered := range []float64{6, 15} { // 2× and 5× with two retries
		for _, seed := range testSeeds() {
			t.Run(fmt.Sprintf("%gC/seed%d", offered, seed), func(t *testing.T) {
				p := newPlant(c0, seed)
				p.rejCost = 0.04
				ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed))
				src := &source{ctx: context.Background(), rate: steps(
					[]time.Duration{0, 2 * time.Second}, []float64{0.5 * c0, offered * c0})}
				s := &sim{ctl: ctl, p: p, srcs: []*source{src}, t0: time.Unix(1_700_000_000, 0)}
				s.run(2*time.Second, time.Second)
				ws := merge(s.run(14*time.Second, 250*time.Millisecond), 4)
				// The plant queues what the controller admitted before the
				// signal showed the flood; with 60% of its capacity going to
				// rejections that backlog takes ~4 s to drain, the saturated
				// signal meanwhile cuts the target well below its aim, and
				// the climb back takes ~3 s more (measured: windows from
				// 7 s after the step reach ≥ 0.9 on every seed; earlier
				// ones do not). Judge the steady state after that: it must
				// hold the signal at target without drifting towards zero.
				for _, w := range from(ws, 10*time.Second) {
					at := p.atTarget(w.offered)
					t.Logf("%v–%v completed %.0f/s (at target %.0f, ratio %.2f) util %.3f", w.start, w.end, w.completed, at, w.completed/at, w.util)
					if w.completed < 0.9*at || math.Abs(w.util-0.8) > 0.05 {
						t.Errorf("window %v–%v: completed %.0f/s of %.0f at target (%.2f), utilisation %.3f; want ≥ 0.9 and |util−0.8| ≤ 0.05",
							w.start, w.end, w.completed, at, w.completed/at, w.util)
					}
				}
			})
		}
	}
}
