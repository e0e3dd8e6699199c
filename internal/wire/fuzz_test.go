package wire

import (
	"math"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// Each fuzz target feeds two values (a repeated header) and checks that
// invalid input yields the default and that valid input survives
// format(parse(x)) unchanged.

func FuzzParseTimeoutMs(f *testing.F) {
	for _, s := range []string{"250", "-1", "0", "1.5", "NaN", huge, "1,2", " 7 "} {
		f.Add(s, "")
	}
	f.Add("500", "100")
	f.Fuzz(func(t *testing.T, a, b string) {
		d, ok := ParseTimeoutMs([]string{a, b})
		if !ok {
			if d != 0 {
				t.Fatalf("invalid %q %q: got %v; want default 0", a, b, d)
			}
			return
		}
		if d < 0 || d > MaxTimeout || d%time.Millisecond != 0 {
			t.Fatalf("ParseTimeoutMs(%q, %q) = %v; out of range", a, b, d)
		}
		if d2, ok2 := ParseTimeoutMs([]string{FormatTimeoutMs(d)}); d2 != d || !ok2 {
			t.Fatalf("round trip of %v: got %v, %v", d, d2, ok2)
		}
	})
}

func FuzzParseGRPCTimeout(f *testing.F) {
	for _, s := range []string{"1S", "100m", "0n", "99999999H", "123456789m", "-1S", "S", "1s"} {
		f.Add(s, "")
	}
	f.Add("1S", "20m")
	f.Fuzz(func(t *testing.T, a, b string) {
		d, ok := ParseGRPCTimeout([]string{a, b})
		if !ok {
			if d != 0 {
				t.Fatalf("invalid %q %q: got %v; want default 0", a, b, d)
			}
			return
		}
		if d < 0 || d > MaxTimeout {
			t.Fatalf("ParseGRPCTimeout(%q, %q) = %v; out of range", a, b, d)
		}
		s := FormatGRPCTimeout(d)
		if len(s) > 9 {
			t.Fatalf("FormatGRPCTimeout(%v) = %q; longer than 8 digits + unit", d, s)
		}
		if d2, ok2 := ParseGRPCTimeout([]string{s}); d2 != d || !ok2 {
			t.Fatalf("round trip of %v via %q: got %v, %v", d, s, d2, ok2)
		}
	})
}

func FuzzParseCriticality(f *testing.F) {
	for _, s := range []string{"CRITICAL_PLUS", "sheddable", "4", "0", "5", "", "CRİTICAL", "1,4"} {
		f.Add(s, "")
	}
	f.Add("CRITICAL_PLUS", "SHEDDABLE")
	f.Fuzz(func(t *testing.T, a, b string) {
		c, ok := ParseCriticality([]string{a, b})
		if !c.Valid() {
			t.Fatalf("ParseCriticality(%q, %q) = invalid %d", a, b, c)
		}
		if !ok {
			if c != levee.Critical {
				t.Fatalf("invalid %q %q: got %v; want default CRITICAL", a, b, c)
			}
			return
		}
		if c2, ok2 := ParseCriticality([]string{FormatCriticality(c)}); c2 != c || !ok2 {
			t.Fatalf("round trip of %v: got %v, %v", c, c2, ok2)
		}
		// Repeating the header never raises the level.
		if ca, oka := ParseCriticality([]string{a}); oka && ca.Rank() < c.Rank() {
			t.Fatalf("adding %q raised %v to %v", b, ca, c)
		}
		// A single plain element agrees with the root package's parser.
		if !strings.ContainsAny(a, ",") && b == "" {
			if want, err := levee.ParseCriticality(a); err == nil && want != c {
				t.Fatalf("ParseCriticality(%q) = %v; levee.ParseCriticality = %v", a, c, want)
			}
		}
	})
}

func FuzzParseTenant(f *testing.F) {
	for _, s := range []string{"acme", " acme ", "a\x00b", "société", huge, "", "a\xffb"} {
		f.Add(s, "")
	}
	f.Add("acme", "evil")
	f.Add("acme", "acme")
	f.Fuzz(func(t *testing.T, a, b string) {
		vals := []string{a}
		if b != "" {
			vals = append(vals, b)
		}
		ten, ok := ParseTenant(vals)
		if !ok {
			if ten != "" {
				t.Fatalf("invalid %q: got %q; want default \"\"", vals, ten)
			}
			return
		}
		if ten == "" || len(ten) > max(MaxTenantLen, len(HashTenantPrefix)+32) {
			t.Fatalf("ParseTenant(%q) = %q; empty or too long", vals, ten)
		}
		for i := 0; i < len(ten); i++ {
			if ten[i] < 0x20 || ten[i] >= 0x7f {
				t.Fatalf("ParseTenant(%q) = %q; not printable ASCII", vals, ten)
			}
		}
		if got := FormatTenant(ten); got != ten {
			t.Fatalf("round trip of %q: got %q", ten, got)
		}
	})
}

func FuzzPeerTenant(f *testing.F) {
	for _, s := range []string{"192.0.2.1:80", "[2001:db8::1]:443", "[::ffff:1.2.3.4]:1", "", "x", "1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := PeerTenant(s)
		if got == "unknown" {
			return
		}
		p, err := netip.ParsePrefix(got)
		if err != nil || p != p.Masked() || (p.Bits() != 24 && p.Bits() != 64) || (p.Bits() == 24) != p.Addr().Is4() {
			t.Fatalf("PeerTenant(%q) = %q; want a masked /24 or /64", s, got)
		}
	})
}

func FuzzParseAttempt(f *testing.F) {
	for _, s := range []string{"0", "2", "-1", "12", huge, "NaN", "1,3"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		n, ok := ParseAttempt([]string{a, b})
		if !ok {
			if n != 0 {
				t.Fatalf("invalid %q %q: got %d; want default 0", a, b, n)
			}
			return
		}
		if n < 0 || n > MaxAttempt {
			t.Fatalf("ParseAttempt(%q, %q) = %d; out of range", a, b, n)
		}
		if n2, ok2 := ParseAttempt([]string{FormatAttempt(n)}); n2 != n || !ok2 {
			t.Fatalf("round trip of %d: got %d, %v", n, n2, ok2)
		}
	})
}

func FuzzParseRetryAfterMs(f *testing.F) {
	for _, s := range []string{"1500", "0", "-1", huge, "1.5", "NaN"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		d, _, ok := ParseRetryAfterMs([]string{a, b})
		if !ok {
			if d != 0 {
				t.Fatalf("invalid %q %q: got %v; want default 0", a, b, d)
			}
			return
		}
		if d < 0 || d > MaxRetryAfter {
			t.Fatalf("ParseRetryAfterMs(%q, %q) = %v; out of range", a, b, d)
		}
		if d2, _, ok2 := ParseRetryAfterMs([]string{FormatRetryAfterMs(d)}); d2 != d || !ok2 {
			t.Fatalf("round trip of %v: got %v, %v", d, d2, ok2)
		}
		secs, ok3 := ParseRetryAfter([]string{FormatRetryAfter(d)}, time.Time{})
		want := max((d+time.Second-1)/time.Second*time.Second, time.Second)
		if !ok3 || secs != want {
			t.Fatalf("Retry-After for %v = %v, %v; want whole seconds ≥ 1 rounded up", d, secs, ok3)
		}
	})
}

func FuzzParseReject(f *testing.F) {
	for _, s := range []string{"overloaded", "overloaded; no-retry", "QUOTA;NO-RETRY", "busy", "", "deadline; x"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		r, nr, ok := ParseReject([]string{a, b})
		if !ok {
			if r != 0 || nr {
				t.Fatalf("invalid %q %q: got %v, %v; want default 0, false", a, b, r, nr)
			}
			return
		}
		r2, nr2, ok2 := ParseReject([]string{FormatReject(r, nr)})
		if r2 != r || nr2 != nr || !ok2 {
			t.Fatalf("round trip of %v, %v: got %v, %v, %v", r, nr, r2, nr2, ok2)
		}
	})
}

func FuzzParseLoad(f *testing.F) {
	for _, s := range []string{"0.850", "2", "NaN", "-1", "1e3", huge, "."} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		l, ok := ParseLoad([]string{a, b})
		if !ok {
			if l != 0 {
				t.Fatalf("invalid %q %q: got %v; want default 0", a, b, l)
			}
			return
		}
		if math.IsNaN(l) || l < 0 || l > MaxLoad {
			t.Fatalf("ParseLoad(%q, %q) = %v; out of range", a, b, l)
		}
		l2, ok2 := ParseLoad([]string{string(AppendLoad(nil, l))})
		if !ok2 || math.Abs(l2-l) > 0.0005+1e-9 {
			t.Fatalf("round trip of %v: got %v, %v", l, l2, ok2)
		}
	})
}
