package admit_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// served is the share of src's requests admitted.
func served(src *source) float64 {
	return float64(src.admitted) / float64(max(1, src.admitted+src.rejected))
}

// TestLadderOneTenant: a service whose callers are one tenant (loopback
// clients share one /24; a service behind one load balancer is one
// address) sheds lowest criticality first, as one without tenants does.
// At 2C and 3C split evenly over the four criticalities, measured over
// the whole overload from its onset: CRITICAL_PLUS served ≥ 99%, each
// SHEDDABLE level ≤ 10%, and at 2C (CRITICAL_PLUS and CRITICAL fill the
// capacity) CRITICAL ≥ 75%. The tenant stage protects other tenants; with
// none (or with nine tenants of 0.3% each beside it) it must not pre-empt
// the ladder, and inside a tenant its cut goes lowest criticality first.
// Before, CRITICAL_PLUS was served 0.983–0.989 at 3C: the onset's drain
// shed it (the backlog drained at the expense of every rank), the surge
// bound paced every criticality alike, and a capacity first learned in a
// cold-start episode started from a tenth of its value.
func TestLadderOneTenant(t *testing.T) {
	for _, others := range []int{0, 9} {
		for _, load := range []float64{2, 3} {
			for _, seed := range testSeeds() {
				t.Run(fmt.Sprintf("%d others/%gC/seed%d", others, load, seed), func(t *testing.T) {
					const c0 = 1000.0
					p := newPlant(c0, seed)
					ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed))
					c := p.atTarget(load * c0 / 1.02)
					share := 1 - 0.003*float64(others)
					var one []*source
					for _, cr := range levee.Criticalities() {
						one = append(one, &source{ctx: critCtx(cr, "127.0.0.0/24"),
							rate: steps([]time.Duration{0, 3 * time.Second}, []float64{0.2 * c * share, load / 4 * c * share})})
					}
					srcs := append([]*source(nil), one...)
					for i := range others {
						for _, cr := range levee.Criticalities() {
							srcs = append(srcs, &source{ctx: critCtx(cr, fmt.Sprint("10.0.", i, ".0/24")), rate: constant(0.003 * load / 4 * c)})
						}
					}
					s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
					s.run(3*time.Second, time.Second)
					for _, src := range srcs {
						src.admitted, src.rejected = 0, 0
					}
					s.run(10*time.Second, time.Second)
					t.Logf("served: SHEDDABLE %.3f SHEDDABLE_PLUS %.3f CRITICAL %.3f CRITICAL_PLUS %.4f",
						served(one[0]), served(one[1]), served(one[2]), served(one[3]))
					if got := served(one[3]); got < 0.99 {
						t.Errorf("CRITICAL_PLUS served %.4f, want ≥ 0.99", got)
					}
					for r := range 2 {
						if got := served(one[r]); got > 0.10 {
							t.Errorf("%v served %.3f, want ≤ 0.10", levee.FromRank(r), got)
						}
					}
					if got := served(one[2]); load == 2 && got < 0.75 {
						t.Errorf("CRITICAL served %.3f at 2C, want ≥ 0.75", got)
					}
				})
			}
		}
	}
}

// TestTenantBesideNine is issue 16's tenant case on virtual time: one
// tenant at 5C beside nine that send 0.3C in all, every one with its
// requests all CRITICAL or split over the four criticalities; over the
// whole overload from its onset the nine are served ≥ 99%. Before, the
// onset's drain shed the nine's requests along with the big tenant's
// (0.982–0.988 served).
func TestTenantBesideNine(t *testing.T) {
	for _, split := range []bool{false, true} {
		for _, seed := range testSeeds() {
			t.Run(fmt.Sprintf("split %v/seed%d", split, seed), func(t *testing.T) {
				const c0 = 1000.0
				p := newPlant(c0, seed)
				ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed))
				c := p.atTarget(5.3 * c0 / 1.02)
				crs := []levee.Criticality{levee.Critical}
				if split {
					all := levee.Criticalities()
					crs = all[:]
				}
				n := float64(len(crs))
				var srcs, nine []*source
				for _, cr := range crs {
					srcs = append(srcs, &source{ctx: critCtx(cr, "10.0.0.0/24"), rate: steps([]time.Duration{0, 3 * time.Second}, []float64{0.3 * c / n, 5 * c / n})})
					for i := range 9 {
						nine = append(nine, &source{ctx: critCtx(cr, fmt.Sprint("10.0.", i+1, ".0/24")), rate: constant(0.3 * c / 9 / n)})
					}
				}
				srcs = append(srcs, nine...)
				s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
				s.run(3*time.Second, time.Second)
				for _, src := range srcs {
					src.admitted, src.rejected = 0, 0
				}
				s.run(10*time.Second, time.Second)
				var adm, rej int
				for _, src := range nine {
					adm += src.admitted
					rej += src.rejected
				}
				got := float64(adm) / float64(adm+rej)
				t.Logf("the nine served %.4f", got)
				if got < 0.99 {
					t.Errorf("the nine served %.4f, want ≥ 0.99", got)
				}
			})
		}
	}
}
