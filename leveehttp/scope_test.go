package leveehttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

func TestHostPatterns(t *testing.T) {
	tests := []struct {
		pattern, url string
		want         bool
	}{
		{"api.internal", "http://api.internal/x", true},
		{"api.internal", "https://API.Internal.:8443/x", true},
		{"api.internal", "http://api.internal.evil.com/", false},
		{"api.internal:8443", "https://api.internal:8443/", true},
		{"api.internal:8443", "https://api.internal/", false},
		{"api.internal:443", "https://api.internal/", true},
		{"api.internal:80", "http://api.internal/", true},
		{"*.svc.cluster.local", "http://a.b.svc.cluster.local:9000/", true},
		{"*.svc.cluster.local", "http://svc.cluster.local/", false},
		{"*.svc.cluster.local", "http://evilsvc.cluster.local/", false},
		{"10.0.0.7", "http://10.0.0.7:8080/", true},
		{"[fd00::7]:80", "http://[fd00::7]/", true},
		{"fd00::7", "http://[FD00::7]:81/", true},
	}
	for _, tt := range tests {
		tr := NewTransport(nil, WithHosts(tt.pattern))
		req := httptest.NewRequest("GET", tt.url, nil)
		if got, _ := tr.scope(req); got != tt.want {
			t.Errorf("WithHosts(%q) on %s: in scope %v, want %v", tt.pattern, tt.url, got, tt.want)
		}
	}
	for _, bad := range []string{"", "http://api", "api/x", "a b", "*", "*.", "a.*.b", "user@host"} {
		if !panics(func() { WithHosts(bad) }) {
			t.Errorf("WithHosts(%q) did not panic", bad)
		}
	}
}

func panics(f func()) (p bool) {
	defer func() { p = recover() != nil }()
	f()
	return false
}

func TestThrottleKey(t *testing.T) {
	tests := []struct{ scheme, host, want string }{
		{"https", "api.example", "api.example:443"},
		{"https", "API.Example.:443", "api.example:443"},
		{"http", "api.example:80", "api.example:80"},
		{"http", "api.example:8080", "api.example:8080"},
		{"http", "[::1]:9", "[::1]:9"},
		{"http", "[::1]", "[::1]:80"},
	}
	for _, tt := range tests {
		if got := throttleKey(tt.scheme, tt.host); got != tt.want {
			t.Errorf("throttleKey(%q, %q) = %q, want %q", tt.scheme, tt.host, got, tt.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { throttleKey("http", "api.example:80") }); n != 0 {
		t.Errorf("canonical host: %v allocs, want 0", n)
	}
	for _, h := range []string{"\xff", "a\x00b", strings.Repeat("x", 300)} {
		k := throttleKey("http", h)
		if !strings.HasPrefix(k, "h~") || !utf8.ValidString(k) || len(k) > maxHostKey {
			t.Errorf("throttleKey(%q) = %q, want a bounded hash", h, k)
		}
	}
}

// FuzzThrottleKey: every key is printable ASCII and bounded, so it is a
// valid metric label, and the same host always gets the same key.
func FuzzThrottleKey(f *testing.F) {
	f.Add("https", "API.example.:443")
	f.Add("http", "\xff\xfe")
	f.Add("", "[::1%eth0]:80")
	f.Fuzz(func(t *testing.T, scheme, host string) {
		k := throttleKey(scheme, host)
		if k == "" && host != "" || len(k) > maxHostKey+8 || !printable(k) {
			t.Fatalf("throttleKey(%q, %q) = %q", scheme, host, k)
		}
		if k2 := throttleKey(scheme, host); k2 != k {
			t.Fatalf("not stable: %q then %q", k, k2)
		}
	})
}

// TestTransportScopeDefault: without named hosts every host is spoken to
// as a levee host except that no tenant id leaves the process; with named
// hosts, the others are passed through untouched.
func TestTransportScopeDefault(t *testing.T) {
	call := levee.Call{Criticality: levee.SheddablePlus, Tenant: "sk_live_secret"}
	tests := []struct {
		name       string
		opts       []TransportOption
		url        string
		wantLevee  bool
		wantTenant bool
	}{
		{"default", nil, "http://anyone.example/", true, false},
		{"named host", []TransportOption{WithHosts("api.internal")}, "http://api.internal/", true, true},
		{"other host", []TransportOption{WithHosts("api.internal")}, "http://hooks.example/", false, false},
		{"scope function", []TransportOption{WithScope(func(r *http.Request) bool { return r.URL.Path == "/levee" })}, "http://x.example/levee", true, true},
		{"scope function out", []TransportOption{WithScope(func(r *http.Request) bool { return r.URL.Path == "/levee" })}, "http://x.example/other", false, false},
	}
	for _, tt := range tests {
		fb := &fakeBackend{script: always(func() *http.Response { return answer(200) })}
		tr, _ := testTransport(fb, tt.opts...)
		ctx, cancel := ctxWithin(time.Second, call)
		req, _ := http.NewRequestWithContext(ctx, "GET", tt.url, nil)
		resp, err := tr.RoundTrip(req)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		resp.Body.Close()
		h := fb.got[0].Header
		if got := h.Get("Levee-Criticality") != ""; got != tt.wantLevee {
			t.Errorf("%s: levee headers sent %v, want %v (%v)", tt.name, got, tt.wantLevee, h)
		}
		if got := h.Get("Levee-Tenant") != ""; got != tt.wantTenant {
			t.Errorf("%s: tenant sent %v, want %v", tt.name, got, tt.wantTenant)
		}
		if !tt.wantLevee && fb.got[0] != req {
			t.Errorf("%s: an out-of-scope request was copied, want it passed through as it is", tt.name)
		}
	}
}

// TestTransportBodyOutlivesDefaultTimeout: without a deadline the Policy's
// Timeout bounds the wait for the response, never the reading of a body
// that streams for longer.
func TestTransportBodyOutlivesDefaultTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		for i := range 6 {
			fmt.Fprintf(w, "chunk %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(50 * time.Millisecond)
		}
	}))
	defer srv.Close()
	tr := NewTransport(nil, WithPolicy(retry.Policy{Timeout: 100 * time.Millisecond, MaxAttempts: 1}))
	client := &http.Client{Transport: tr}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || strings.Count(string(b), "chunk") != 6 {
		t.Errorf("body read %q, %v; want all 6 chunks (300 ms of body after a 100 ms timeout)", b, err)
	}
}

// TestTransportNoAnswerIsTimeout: a response that does not come within
// the default timeout ends the call with an error matching
// context.DeadlineExceeded, and counts against the backend.
func TestTransportNoAnswerIsTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	g := throttle.NewGroup()
	tr := NewTransport(nil, WithThrottle(g), WithPolicy(retry.Policy{Timeout: 50 * time.Millisecond, MaxAttempts: 1}))
	_, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no response within") {
		t.Fatalf("err = %v, want a timeout (context.DeadlineExceeded)", err)
	}
	var st throttle.Stats
	g.Range(func(_ string, th *throttle.Throttle) bool { st = th.Stats(); return true })
	if st.Completed[levee.Critical] != 1 || st.Accepts[levee.Critical] != 0 {
		t.Errorf("throttle stats %+v, want the timeout counted as not accepted", st)
	}
}

// refusing is a RoundTripper whose every dial is refused.
type refusing struct{ n int }

func (r *refusing) RoundTrip(*http.Request) (*http.Response, error) {
	r.n++
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// TestRefusedConnectionsNeverThrottle: a backend refusing connections for
// a minute (a restart, a crash loop) teaches the throttle nothing: its
// rejection probability stays 0, and the caller sees the refusal as what
// it is, not as a levee rejection.
func TestRefusedConnectionsNeverThrottle(t *testing.T) {
	g := throttle.NewGroup()
	rt := &refusing{}
	var now time.Time
	tr, _ := testTransport(rt, WithThrottle(g), func(c *transportConfig) {
		now = t0
		c.now = func() time.Time { return now }
	})
	for i := range 6000 { // a minute at 100 calls a second
		now = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(time.Second))
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://restarting.example/", nil)
		_, err := tr.RoundTrip(req)
		cancel()
		if !errors.Is(err, syscall.ECONNREFUSED) || levee.AsRejected(err) != nil {
			t.Fatalf("call %d: err = %v, want the refusal itself", i, err)
		}
		if p := g.Get("restarting.example:80").RejectProbabilityAt(now, levee.Critical); p != 0 {
			t.Fatalf("after %v of refused connections: P = %.3f, want 0", now.Sub(t0), p)
		}
	}
	if st := g.Get("restarting.example:80").Stats(); st.Rejected[levee.Critical] != 0 {
		t.Errorf("%d calls refused locally, want 0", st.Rejected[levee.Critical])
	}
}

// timingOut is a RoundTripper for a backend without levee that shows its
// overload by not answering in time: every attempt ends with the error
// net/http gives when the response headers do not come.
type timingOut struct{}

type headerTimeout struct{}

func (headerTimeout) Error() string   { return "net/http: timeout awaiting response headers" }
func (headerTimeout) Timeout() bool   { return true }
func (headerTimeout) Temporary() bool { return true }

func (timingOut) RoundTrip(*http.Request) (*http.Response, error) { return nil, headerTimeout{} }

// TestTimeoutsThrottle: a backend that only times out is throttled like
// one that rejects.
func TestTimeoutsThrottle(t *testing.T) {
	g := throttle.NewGroup()
	var now time.Time
	tr, _ := testTransport(timingOut{}, WithThrottle(g), WithPolicy(retry.Policy{MaxAttempts: 1}), func(c *transportConfig) {
		c.now = func() time.Time { return now }
	})
	throttled := 0
	for i := range 3000 { // 30 s at 100 calls a second
		now = t0.Add(time.Duration(i) * 10 * time.Millisecond)
		ctx, cancel := context.WithDeadline(context.Background(), now.Add(time.Second))
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://slow.example/", nil)
		_, err := tr.RoundTrip(req)
		cancel()
		if errors.Is(err, levee.ErrThrottled) && i >= 2000 {
			throttled++
		}
	}
	if throttled < 900 {
		t.Errorf("%d of the last 1000 calls throttled locally, want most", throttled)
	}
}

// TestTwoHostsOneClient: one http.Client, one Transport naming the levee
// backend only, beside a plain third-party server. The third party gets
// none of levee's headers, and its own 429 and 504 arrive as responses
// with their bodies; the levee backend's overload arrives as "overloaded;
// no-retry" once this layer has retried.
func TestTwoHostsOneClient(t *testing.T) {
	// The levee backend: a Handler whose admission sheds every request.
	shed := NewHandler(okHandler, nil)
	var sent atomic.Int32
	shed.admit = func(context.Context) (admit.Ticket, error) {
		sent.Add(1)
		return admit.Ticket{}, &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 10 * time.Millisecond}
	}
	leveeSrv := httptest.NewServer(shed)
	defer leveeSrv.Close()

	var mu sync.Mutex
	var thirdHeaders []http.Header
	third := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		thirdHeaders = append(thirdHeaders, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/quota":
			w.WriteHeader(http.StatusTooManyRequests)
			fmt.Fprint(w, `{"error":"rate limited","retry_in":7}`)
		case "/slow":
			w.WriteHeader(http.StatusGatewayTimeout)
			fmt.Fprint(w, `{"error":"upstream timeout"}`)
		}
	}))
	defer third.Close()

	// The transport's clock moves only by its waits and starts on a whole
	// second, where a throttle tick (100 ms) starts too: the throttle is
	// asked for each retry when the rejection arrives (0 and 10–15 ms into
	// the tick), before any fold has seen a rejection. On the real clock a
	// fold could fall in between (a slow round trip, or a tick ending in
	// the retry's wait) and learn one rejection and no accept (P = 1/2):
	// it then refused the retry locally ("throttled", 16 of 300 runs under
	// a CPU hog) before the backend said no-retry.
	tr, waits := testTransportAt(time.Now().Truncate(time.Second), http.DefaultTransport,
		WithHosts(leveeSrv.Listener.Addr().String()),
		WithPolicy(retry.Policy{Budget: retry.NewBudget(), Base: time.Millisecond}))
	client := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(levee.WithCall(context.Background(), levee.Call{Criticality: levee.SheddablePlus, Tenant: "sk_live_secret"}), 5*time.Second)
	defer cancel()
	get := func(url string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
		return client.Do(req)
	}
	for _, c := range []struct {
		path string
		code int
		body string
	}{{"/quota", 429, `{"error":"rate limited","retry_in":7}`}, {"/slow", 504, `{"error":"upstream timeout"}`}} {
		resp, err := get(third.URL + c.path)
		if err != nil {
			t.Fatalf("third party %s: %v, want its own response", c.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v map[string]any
		if resp.StatusCode != c.code || string(b) != c.body || json.Unmarshal(b, &v) != nil {
			t.Errorf("third party %s: %d %q, want %d %q", c.path, resp.StatusCode, b, c.code, c.body)
		}
	}
	mu.Lock()
	for _, h := range thirdHeaders {
		for k := range h {
			if strings.HasPrefix(k, "Levee-") {
				t.Errorf("the third party received %s: %v", k, h)
			}
		}
	}
	if len(thirdHeaders) != 2 {
		t.Errorf("the third party got %d requests, want 2 (never retried)", len(thirdHeaders))
	}
	mu.Unlock()

	_, err := get(leveeSrv.URL + "/api")
	rej := levee.AsRejected(err)
	if rej == nil || rej.Reason != levee.Overloaded || !rej.NoRetry {
		t.Errorf("levee backend: %v, want overloaded; no-retry", err)
	}
	if got, want := sent.Load(), int32(retry.DefaultMaxAttempts); got != want || len(*waits) != int(want)-1 {
		t.Errorf("the levee backend got %d attempts after %d waits, want %d (retried up to the policy's limit)", got, len(*waits), want)
	}
}
