package inbound

import (
	"testing"
	"time"
	"unicode/utf8"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
)

// FuzzDerive: whatever the headers, an untrusted caller never ends above
// CRITICAL, every tenant is printable, valid UTF-8 and bounded, the
// attempt stays in range, and a deadline lies within 24 h of the arrival.
func FuzzDerive(f *testing.F) {
	f.Add("CRITICAL_PLUS", "acme", "2", "100", "1S", "50", "alice", "192.0.2.7:1", false)
	f.Add("4", "a\x01b", "-1", "0", "0n", "x", "", "[::1]:2", true)
	f.Add("sheddable,CRITICAL_PLUS", "\xff\xfe", "99999999999", "99999999999999999999", "99999999H", "-5", "\u00e9", "bufconn", true)
	f.Fuzz(func(t *testing.T, crit, tenant, attempt, ms, grpcTO, envoy, user, peer string, trusted bool) {
		var peers Peers
		x := testRules(&peers, true)
		r := req{trusted: trusted, user: user, peer: peer}
		r.h[Criticality] = []string{crit}
		r.h[Tenant] = []string{tenant}
		r.h[Attempt] = []string{attempt}
		r.h[TimeoutMs] = []string{ms}
		r.h[GRPCTimeout] = []string{grpcTO}
		r.h[EnvoyTimeoutMs] = []string{envoy}
		got, err := x.Derive(&r, t0, t0)
		if err != nil {
			if err != ErrExpired {
				t.Fatalf("err = %v, want nil or ErrExpired", err)
			}
			return
		}
		c := got.Call
		if !c.Criticality.Valid() || !trusted && c.Criticality.Rank() > levee.Critical.Rank() {
			t.Errorf("criticality %v (trusted %v)", c.Criticality, trusted)
		}
		if c.Tenant == "" || len(c.Tenant) > wire.MaxTenantLen || !utf8.ValidString(c.Tenant) {
			t.Errorf("tenant %q", c.Tenant)
		}
		for i := 0; i < len(c.Tenant); i++ {
			if b := c.Tenant[i]; b < 0x20 || b >= 0x7f {
				t.Fatalf("tenant %q has byte %#x", c.Tenant, b)
			}
		}
		if c.Attempt < 0 || c.Attempt > wire.MaxAttempt {
			t.Errorf("attempt %d", c.Attempt)
		}
		if !got.Deadline.IsZero() && (!got.Deadline.After(t0) || got.Deadline.Sub(t0) > 24*time.Hour) {
			t.Errorf("deadline %v after arrival", got.Deadline.Sub(t0))
		}
	})
}
