package admit_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// peerCtx is an untrusted caller at addr, whose tenant is its /64 (IPv6)
// or /24 (IPv4) as the HTTP adapter derives it.
func peerCtx(addr string) context.Context {
	a := netip.MustParseAddr(addr)
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return levee.WithCall(context.Background(), levee.Call{Tenant: p.String(), Peer: a})
}

// randomOf picks one of ctxs at random.
func randomOf(ctxs []context.Context, seed uint64) func(int) context.Context {
	r := rand.New(rand.NewPCG(seed, 99))
	return func(int) context.Context { return ctxs[r.IntN(len(ctxs))] }
}

// groupRun plays legit tenants (0.05C each) for 3 s, then an attacker
// spread over attackers at attackLoad×C for 12 s, and returns the legit
// tenants' admitted share over the last 10 s and the final snapshot.
func groupRun(t *testing.T, seed uint64, opts []admit.Option, legit []context.Context, attackers []context.Context, attackLoad float64) (float64, admit.Snapshot) {
	t.Helper()
	const c0 = 1000.0
	p := newPlant(c0, seed)
	ctl := admit.New(append([]admit.Option{admit.WithSignals(p), admit.WithSeed(seed)}, opts...)...)
	var srcs []*source
	for _, ctx := range legit {
		srcs = append(srcs, &source{ctx: ctx, rate: constant(0.05 * c0)})
	}
	atk := &source{ctx: attackers[0], rate: steps([]time.Duration{0, 3 * time.Second}, []float64{0, attackLoad * c0}), pick: randomOf(attackers, seed)}
	srcs = append(srcs, atk)
	s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
	s.run(5*time.Second, time.Second)
	for _, src := range srcs {
		src.admitted, src.rejected = 0, 0
	}
	s.run(10*time.Second, time.Second)
	var adm, all int
	for _, src := range srcs[:len(legit)] {
		adm += src.admitted
		all += src.admitted + src.rejected
	}
	return float64(adm) / float64(all), ctl.Snapshot()
}

// TestSybilPrefixIsOneTenant: an attacker holding one IPv6 /48 spreads 5×
// the capacity over 2,000 /64s beside four legitimate tenants at 0.2×
// in all. Counted as 2,004 tenants, the attacker shrank everyone's fair
// share until the four legitimate tenants were the heaviest and lost a
// quarter of their requests while it was admitted in full. Its /48 is one
// tenant: the four keep ≥ 95%.
func TestSybilPrefixIsOneTenant(t *testing.T) {
	var sybil []context.Context
	for i := range 2000 {
		sybil = append(sybil, peerCtx(fmt.Sprintf("2001:db8:aaaa:%x::1", i)))
	}
	legit := []context.Context{peerCtx("2001:db8:1:1::7"), peerCtx("2001:db8:2:1::7"), peerCtx("2001:db8:3:1::7"), peerCtx("198.51.100.7")}
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			got, snap := groupRun(t, seed, nil, legit, sybil, 5)
			t.Logf("legitimate tenants admitted %.4f; %d tenants as grouped, %d groups; tenant-stage shed %.0f/s", got, snap.ActiveTenants, snap.TenantGroups, snap.TenantShedRPS)
			if got < 0.95 {
				t.Errorf("legitimate tenants admitted %.4f beside a /48 spread over 2,000 /64s at 5×, want ≥ 0.95", got)
			}
			if snap.TenantGroups < 1 {
				t.Errorf("no prefix grouped")
			}
		})
	}
}

// TestHonestISPNotGrouped: 1,000 honest small tenants, each its own /48
// inside one ISP's /32, send half the capacity in all, beside an abuser
// at 3×. By default an ISP's /32 is never one tenant: they keep ≥ 99%
// and nothing is grouped. The same tenants with GroupIPv6ISP would be one
// tenant far above its share: that is why it is not the default.
func TestHonestISPNotGrouped(t *testing.T) {
	var honest []context.Context
	for i := range 1000 {
		honest = append(honest, peerCtx(fmt.Sprintf("2001:db9:%x:1::5", i)))
	}
	abuser := []context.Context{peerCtx("2001:db8:ffff:1::1")}
	for _, seed := range testSeeds()[:min(2, len(testSeeds()))] {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			// The honest tenants as one source at 0.5C (each 0.0005C), the
			// abuser at 3C.
			const c0 = 1000.0
			p := newPlant(c0, seed)
			ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed))
			hs := &source{ctx: honest[0], rate: constant(0.5 * c0), pick: randomOf(honest, seed)}
			ab := &source{ctx: abuser[0], rate: steps([]time.Duration{0, 3 * time.Second}, []float64{0, 3 * c0})}
			s := &sim{ctl: ctl, p: p, srcs: []*source{hs, ab}, t0: t0}
			s.run(5*time.Second, time.Second)
			hs.admitted, hs.rejected = 0, 0
			s.run(10*time.Second, time.Second)
			got := float64(hs.admitted) / float64(hs.admitted+hs.rejected)
			snap := ctl.Snapshot()
			t.Logf("honest tenants admitted %.4f; %d tenants as grouped, %d groups", got, snap.ActiveTenants, snap.TenantGroups)
			if got < 0.99 {
				t.Errorf("1,000 honest small tenants of one /32 admitted %.4f, want ≥ 0.99", got)
			}
			if snap.TenantGroups != 0 || snap.ActiveTenants < 900 {
				t.Errorf("%d groups, %d tenants: want none grouped and about 1,001 tenants", snap.TenantGroups, snap.ActiveTenants)
			}
		})
	}
}

// TestSybilAcrossISPPrefix: with GroupIPv6ISP, an attacker spreading 5×
// over 2,000 /48s of one /32 is one tenant too.
func TestSybilAcrossISPPrefix(t *testing.T) {
	var sybil []context.Context
	for i := range 2000 {
		sybil = append(sybil, peerCtx(fmt.Sprintf("2001:dba:%x:1::1", i)))
	}
	legit := []context.Context{peerCtx("2001:db8:1:1::7"), peerCtx("2001:db8:2:1::7"), peerCtx("2001:db8:3:1::7"), peerCtx("198.51.100.7")}
	got, snap := groupRun(t, 1, []admit.Option{admit.WithPeerGroups(admit.GroupIPv6ISP)}, legit, sybil, 5)
	t.Logf("legitimate tenants admitted %.4f; %d groups", got, snap.TenantGroups)
	if got < 0.95 {
		t.Errorf("legitimate tenants admitted %.4f beside a /32 spread over 2,000 /48s at 5× (ISP grouping on), want ≥ 0.95", got)
	}
}
