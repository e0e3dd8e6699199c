package leveehttp

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
)

// FuzzHandlerHeaders feeds hostile header values to a Handler and checks
// its promises: untrusted callers never rise above CRITICAL nor choose
// their tenant, an expired budget is answered 504 without calling next, a
// deadline is never more than 24 h away, and the tenant is never empty or
// unprintable.
func FuzzHandlerHeaders(f *testing.F) {
	f.Add("CRITICAL_PLUS", "acme", "250", "", "", "1", "10.1.2.3:4", false)
	f.Add("4", "a\x00b", "-1", "0S", "x", "9999999999", "[::1]:80", true)
	f.Add("sheddable, 4", "société", "1.5", "99999999H", "100", "-2", "bogus", false)
	f.Add("", "", "NaN", "1S", "", "", "", true)
	f.Fuzz(func(t *testing.T, crit, tenant, ms, grpc, envoy, attempt, remote string, trusted bool) {
		var s seen
		h := testHandler(recordingNext(&s), nil, nil, WithTrust(func(*http.Request) bool { return trusted }))
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = remote
		r.Header = http.Header{
			"Levee-Criticality":              {crit},
			"Levee-Tenant":                   {tenant},
			"Levee-Timeout-Ms":               {ms},
			"Grpc-Timeout":                   {grpc},
			"X-Envoy-Expected-Rq-Timeout-Ms": {envoy},
			"Levee-Attempt":                  {attempt},
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)

		d, hasTimeout := wire.ParseTimeout([]string{ms}, []string{grpc}, []string{envoy})
		if hasTimeout && d <= 0 {
			if s.called || w.Code != http.StatusGatewayTimeout {
				t.Fatalf("expired budget: next called %v, status %d; want 504 without next", s.called, w.Code)
			}
			return
		}
		if !s.called {
			t.Fatalf("next not called; status %d", w.Code)
		}
		if !s.call.Criticality.Valid() || !trusted && s.call.Criticality.Rank() > levee.Critical.Rank() {
			t.Fatalf("criticality %v (trusted %v)", s.call.Criticality, trusted)
		}
		if s.call.Tenant == "" || !trusted && s.call.Tenant == tenant && tenant != wire.PeerTenant(remote) {
			t.Fatalf("tenant %q from header %q (trusted %v)", s.call.Tenant, tenant, trusted)
		}
		for i := 0; i < len(s.call.Tenant); i++ {
			if c := s.call.Tenant[i]; c < 0x20 || c == 0x7f {
				t.Fatalf("tenant %q has control characters", s.call.Tenant)
			}
		}
		if s.call.Attempt < 0 || s.call.Attempt > wire.MaxAttempt {
			t.Fatalf("attempt %d", s.call.Attempt)
		}
		if s.hasDL && s.deadline.After(t0.Add(24*time.Hour)) {
			t.Fatalf("deadline %v beyond 24 h", s.deadline.Sub(t0))
		}
		if hasTimeout != s.hasDL {
			t.Fatalf("deadline set %v; want %v", s.hasDL, hasTimeout)
		}
	})
}

// FuzzRejection feeds arbitrary statuses and rejection headers to the
// Transport's response classifier: only 503 with Levee-Reject, 429 and 504
// are rejections, their delay stays within 0..24 h, and no-retry comes only
// from the headers.
func FuzzRejection(f *testing.F) {
	f.Add(503, "overloaded; no-retry", "1500", "2")
	f.Add(503, "", "", "")
	f.Add(429, "quota", "-1", "Sun, 29 Nov 2026 12:00:05 GMT")
	f.Add(504, "bogus", "NaN", "-4")
	f.Add(200, "overloaded", "99999999999999999999", "1")
	f.Fuzz(func(t *testing.T, code int, reject, ms, ra string) {
		h := http.Header{}
		for k, v := range map[string]string{"Levee-Reject": reject, "Levee-Retry-After-Ms": ms, "Retry-After": ra} {
			if v != "" {
				h[k] = []string{v}
			}
		}
		rej := rejection(&http.Response{StatusCode: code, Header: h}, t0, &defaultNames)
		_, _, hasReject := wire.ParseReject(h["Levee-Reject"])
		want := hasReject && (code == 429 || code == 504 || code == 503)
		if (rej != nil) != want {
			t.Fatalf("status %d, Levee-Reject %q: rejection %v; want %v", code, reject, rej, want)
		}
		if rej == nil {
			return
		}
		if rej.RetryAfter < 0 || rej.RetryAfter > 24*time.Hour {
			t.Fatalf("delay %v out of range", rej.RetryAfter)
		}
		if got := map[int]levee.Reason{503: levee.Overloaded, 429: levee.Quota, 504: levee.Deadline}[code]; rej.Reason != got {
			t.Fatalf("status %d gave reason %v; want %v", code, rej.Reason, got)
		}
	})
}
