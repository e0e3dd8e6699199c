package admit_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// TestColdStartUnderFlood starts a controller with no capacity estimate
// under 5C and reports when the 1 s windows first meet the acceptance
// bounds. The plant's backlog is unbounded (no client gives up), so the
// work queued before the first signal reading must be drained.
func TestColdStartUnderFlood(t *testing.T) {
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			p := newPlant(1000, seed)
			ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed))
			s := &sim{ctl: ctl, p: p, t0: t0, srcs: []*source{{ctx: context.Background(), rate: constant(5000)}}}
			ws := s.run(20*time.Second, time.Second)
			settled := time.Duration(-1)
			for _, w := range ws {
				w.atTarget = p.atTarget(w.offered)
				ok := w.completed >= 0.95*w.atTarget && math.Abs(w.util-0.8) <= 0.05
				if ok && settled < 0 {
					settled = w.start
				}
				if !ok {
					settled = -1
				}
			}
			t.Logf("settled (every later 1 s window within bounds) from %v", settled)
			if settled < 0 || settled > 10*time.Second {
				t.Errorf("cold start under 5C settled from %v, want within 10 s", settled)
			}
		})
	}
}
