package admit_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// tenantCtxs returns n contexts, one per tenant.
func tenantCtxs(n int, prefix string) []context.Context {
	out := make([]context.Context, n)
	for i := range out {
		out[i] = levee.WithCall(context.Background(), levee.Call{Tenant: fmt.Sprintf("%s-%d", prefix, i)})
	}
	return out
}

// zipfPick returns a picker of one of ctxs with Zipf weights (s = 1.1) or
// uniformly.
func tenantPicker(ctxs []context.Context, zipf bool, seed uint64) func(int) context.Context {
	r := rand.New(rand.NewPCG(seed, 77))
	if !zipf {
		return func(int) context.Context { return ctxs[r.IntN(len(ctxs))] }
	}
	if len(ctxs) == 1 {
		return func(int) context.Context { return ctxs[0] }
	}
	z := rand.NewZipf(r, 1.1, 1, uint64(len(ctxs)-1))
	return func(int) context.Context { return ctxs[z.Uint64()] }
}

// TestManyTenantsHoldTarget: at 2×, 3× and 5× with 1 to 50,000 tenants,
// uniform and Zipf, the utilisation stays within ±0.05 of the target in
// the steady state. Shedding booked against tenants it did not reach (a
// fair share of a fraction of a request per period, sampled tenants that
// look far above it) used to switch shedding off from 500 tenants on.
func TestManyTenantsHoldTarget(t *testing.T) {
	loads := []float64{2, 3, 5}
	counts := []int{1, 50, 500, 5000, 50000}
	seeds := testSeeds()[:min(3, len(testSeeds()))]
	if testing.Short() {
		counts = []int{1, 500, 50000}
	}
	const c0 = 1000.0
	for _, n := range counts {
		ctxs := tenantCtxs(n, "t")
		for _, zipf := range []bool{false, true} {
			for _, load := range loads {
				for _, seed := range seeds {
					name := fmt.Sprintf("%d/zipf=%v/%gC/seed%d", n, zipf, load, seed)
					t.Run(name, func(t *testing.T) {
						p := newPlant(c0, seed)
						ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed))
						src := &source{ctx: ctxs[0], rate: steps([]time.Duration{0, 3 * time.Second}, []float64{0.5 * c0, load * c0}), pick: tenantPicker(ctxs, zipf, seed)}
						s := &sim{ctl: ctl, p: p, srcs: []*source{src}, t0: t0}
						s.run(8*time.Second, time.Second)
						ws := s.run(7*time.Second, time.Second)
						var util float64
						worst := 0.0
						for _, w := range ws {
							util += w.util / float64(len(ws))
							worst = math.Max(worst, math.Abs(w.util-p.target))
						}
						snap := ctl.Snapshot()
						t.Logf("mean utilisation %.3f (target %.2f), worst 1 s window off by %.3f; tenant-stage shed %.0f/s of %.0f offered; active %d",
							util, p.target, worst, snap.TenantShedRPS, snap.OfferedRPS, snap.ActiveTenants)
						if math.Abs(util-p.target) > 0.05 {
							t.Errorf("mean utilisation %.3f, want within ±0.05 of %.2f", util, p.target)
						}
						// The tenant stage's shed is measured: never far
						// more than what was rejected (one period's rate
						// against the last second's).
						if last := ws[len(ws)-1]; snap.TenantShedRPS > 1.5*last.rejected+50 {
							t.Errorf("TenantShedRPS %.0f/s while %.0f/s were rejected in all", snap.TenantShedRPS, last.rejected)
						}
					})
				}
			}
		}
	}
}
