package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/internal/wire"
)

// scripted is a backend that answers from a script, in order, and records
// what it was sent.
type scripted struct {
	addr   string
	mu     *sync.Mutex
	log    *[]sent
	answer func(r *http.Request, body string) (*http.Response, error)
}

type sent struct {
	addr, attempt, timeoutMs, crit, tenant, body string
}

func (s *scripted) RoundTrip(r *http.Request) (*http.Response, error) {
	var body string
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		body = string(b)
	}
	s.mu.Lock()
	*s.log = append(*s.log, sent{s.addr, r.Header.Get(wire.Attempt), r.Header.Get(wire.TimeoutMs),
		r.Header.Get(wire.Criticality), r.Header.Get(wire.Tenant), body})
	s.mu.Unlock()
	return s.answer(r, body)
}

func respond(r *http.Request, code int, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return &http.Response{StatusCode: code, Header: h, Body: io.NopCloser(strings.NewReader("from backend")), Request: r}
}

var (
	replyOK         = func(r *http.Request, _ string) (*http.Response, error) { return respond(r, 200), nil }
	replyOverloaded = func(r *http.Request, _ string) (*http.Response, error) {
		return respond(r, 503, wire.Reject, "overloaded", wire.RetryAfterMs, "1500"), nil
	}
	replyNoRetry = func(r *http.Request, _ string) (*http.Response, error) {
		return respond(r, 503, wire.Reject, "overloaded; no-retry"), nil
	}
	replyPlain503 = func(r *http.Request, _ string) (*http.Response, error) { return respond(r, 503), nil }
	replyRefused  = func(*http.Request, string) (*http.Response, error) { return nil, errRefused }
	replyReset    = func(*http.Request, string) (*http.Response, error) {
		return nil, errors.New("read tcp: connection reset by peer")
	}
	replyQuota = func(r *http.Request, _ string) (*http.Response, error) {
		return respond(r, 429, wire.Reject, "quota", wire.RetryAfterMs, "2000"), nil
	}
)

// retryCase runs one request through a proxy whose backends answer as
// given (in address order a, b, c) and returns the answer and what the
// backends were sent.
func retryCase(t *testing.T, cfg *Config, method, body string, hdr http.Header, answers ...func(*http.Request, string) (*http.Response, error)) (*httptest.ResponseRecorder, []sent) {
	t.Helper()
	var mu sync.Mutex
	var log []sent
	bs := map[string]*scripted{}
	cfg.Backends.Static = nil
	for i, a := range answers {
		addr := string(rune('a'+i)) + ".test:80"
		bs[addr] = &scripted{addr: addr, mu: &mu, log: &log, answer: a}
		cfg.Backends.Static = append(cfg.Backends.Static, Endpoint{Address: addr})
	}
	n := uint64(0)
	h, err := New(cfg, WithTransport(func(addr string) http.RoundTripper { return bs[addr] }),
		WithLogger(slog.New(slog.DiscardHandler)),
		// Choose the backends in address order: the draw's low half picks
		// the first candidate.
		WithRand(func() uint64 { n++; return 0 }))
	if err != nil {
		t.Fatal(err)
	}
	var rb io.Reader
	if body != "" {
		rb = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "/r", rb)
	for k, v := range hdr {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, log
}

func addrs(log []sent) string {
	var s []string
	for _, x := range log {
		s = append(s, x.addr[:1])
	}
	return strings.Join(s, ",")
}

// TestRetryRules: only idempotent requests (or requests that never left)
// are retried, only after a connection failure, a reset or a 503 without
// no-retry, never to the same backend twice in a row; a proxy that gave up
// says "overloaded; no-retry" with the backend's delay; what it does not
// retry passes through as the backend said it.
func TestRetryRules(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		answers    []func(*http.Request, string) (*http.Response, error)
		attempts   int
		wantCode   int
		wantSent   string
		wantReject string
		wantError  string
	}{
		{"GET 503 overloaded: retried elsewhere", "GET", fs(replyOverloaded, replyOK), 2, 200, "a,b", "", ""},
		{"GET plain 503: retried elsewhere", "GET", fs(replyPlain503, replyOK), 2, 200, "a,b", "", ""},
		{"GET 503 no-retry: passed through", "GET", fs(replyNoRetry, replyOK), 2, 503, "a", "overloaded; no-retry", ""},
		{"POST 503: not retried, passed through", "POST", fs(replyOverloaded, replyOK), 2, 503, "a", "overloaded", ""},
		{"POST refused: retried (never sent)", "POST", fs(replyRefused, replyOK), 2, 200, "a,b", "", ""},
		{"POST reset: not retried", "POST", fs(replyReset, replyOK), 2, 502, "a", "", "reset"},
		{"GET reset: retried", "GET", fs(replyReset, replyOK), 2, 200, "a,b", "", ""},
		{"GET 429: passed through", "GET", fs(replyQuota, replyOK), 2, 429, "a", "quota", ""},
		{"GET both overloaded: gave up, no-retry", "GET", fs(replyOverloaded, replyOverloaded), 2, 503, "a,b", "overloaded; no-retry", "gave-up"},
		{"GET 3 attempts on 2 backends: never twice in a row", "GET", fs(replyOverloaded, replyOverloaded), 3, 503, "a,b,a", "overloaded; no-retry", "gave-up"},
		{"GET one backend: nowhere else, passed through", "GET", fs(replyOverloaded), 2, 503, "a", "overloaded", ""},
		{"GET retries off: passed through", "GET", fs(replyOverloaded, replyOK), 1, 503, "a", "overloaded", ""},
		{"GET all refused: unreachable", "GET", fs(replyRefused, replyRefused), 2, 502, "a,b", "", "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Retry.MaxAttempts = tt.attempts
				rec, log := retryCase(t, cfg, tt.method, "", nil, tt.answers...)
				if rec.Code != tt.wantCode || addrs(log) != tt.wantSent {
					t.Errorf("answered %d after sending to %q, want %d after %q", rec.Code, addrs(log), tt.wantCode, tt.wantSent)
				}
				if got := rec.Header().Get(wire.Reject); got != tt.wantReject {
					t.Errorf("Levee-Reject %q, want %q", got, tt.wantReject)
				}
				if got := rec.Header().Get(HeaderError); got != tt.wantError {
					t.Errorf("%s %q, want %q", HeaderError, got, tt.wantError)
				}
				for i, s := range log {
					if want := wire.FormatAttempt(i); s.attempt != want {
						t.Errorf("attempt %d sent Levee-Attempt %q, want %q", i, s.attempt, want)
					}
				}
			})
		})
	}
}

func fs(f ...func(*http.Request, string) (*http.Response, error)) []func(*http.Request, string) (*http.Response, error) {
	return f
}

// TestGaveUpKeepsDelay: the caller of a proxy that gave up hears the
// backend's delay.
func TestGaveUpKeepsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, _ := retryCase(t, DefaultConfig(), "GET", "", nil, replyOverloaded, replyOverloaded)
		d, _, ok := wire.ParseRetryAfterMs(rec.Header()[wire.RetryAfterMs])
		// leveehttp jitters the advice by ±25%.
		if !ok || d < 1125*time.Millisecond || d > 1875*time.Millisecond {
			t.Errorf("Levee-Retry-After-Ms %v (ok %v), want 1.5s ± 25%%", d, ok)
		}
	})
}

// TestRetryBody: an idempotent request's body is replayed whole to the
// next backend when it fits the buffer; a larger one streams and is not
// retried once sent.
func TestRetryBody(t *testing.T) {
	tests := []struct {
		name     string
		size     int
		buffer   int
		wantSent string
		wantCode int
	}{
		{"fits: replayed", 1000, 4096, "a,b", 200},
		{"larger than the buffer: not replayed", 10000, 4096, "a", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Retry.BufferBytes = tt.buffer
				body := strings.Repeat("x", tt.size)
				rec, log := retryCase(t, cfg, "PUT", body, nil, replyOverloaded, replyOK)
				if rec.Code != tt.wantCode || addrs(log) != tt.wantSent {
					t.Fatalf("answered %d after %q, want %d after %q", rec.Code, addrs(log), tt.wantCode, tt.wantSent)
				}
				for _, s := range log {
					if s.body != body {
						t.Errorf("%s received %d bytes, want %d", s.addr, len(s.body), len(body))
					}
				}
			})
		})
	}
}

// TestEdgeHeaders: the backend hears the edge's verdict and the time left
// minus the margin; an untrusted caller cannot raise itself above CRITICAL
// nor name its tenant; a trusted network keeps its headers; a route rule
// sets an untrusted caller's criticality and tenant.
func TestEdgeHeaders(t *testing.T) {
	trusted := config.Default()
	n, _ := config.ParseNetwork("192.0.2.0/24") // httptest's RemoteAddr
	trusted.HTTP.TrustedNetworks = []config.Network{n}
	ruled := config.Default()
	ruled.HTTP.Routes = []config.Route{{Name: "api", Path: "/r", Criticality: "CRITICAL_PLUS", TenantHeader: "X-Api-Key"}}
	tests := []struct {
		name       string
		router     *config.Router
		hdr        http.Header
		wantCrit   string
		wantTenant string
		wantRoute  string
	}{
		{"untrusted asks CRITICAL_PLUS: capped", nil, http.Header{wire.Criticality: {"CRITICAL_PLUS"}, wire.Tenant: {"acme"}}, "CRITICAL", "192.0.2.0/24", "default"},
		{"untrusted asks SHEDDABLE: kept", nil, http.Header{wire.Criticality: {"SHEDDABLE"}}, "SHEDDABLE", "192.0.2.0/24", "default"},
		{"trusted keeps its headers", config.NewRouter(trusted), http.Header{wire.Criticality: {"CRITICAL_PLUS"}, wire.Tenant: {"acme"}}, "CRITICAL_PLUS", "acme", "default"},
		{"route rule for an untrusted caller", config.NewRouter(ruled), http.Header{wire.Tenant: {"acme"}, "X-Api-Key": {"key-1"}}, "CRITICAL_PLUS", "key-1", "api"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var log []sent
			b := &scripted{addr: "a.test:80", mu: &mu, log: &log, answer: replyOK}
			cfg := DefaultConfig()
			cfg.Backends.Static = []Endpoint{{Address: b.addr}}
			h, err := New(cfg, WithTransport(func(string) http.RoundTripper { return b }), WithRouter(tt.router),
				WithLogger(slog.New(slog.DiscardHandler)))
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("GET", "/r", nil)
			for k, v := range tt.hdr {
				req.Header[k] = v
			}
			req.Header.Set(wire.TimeoutMs, "500")
			h.ServeHTTP(httptest.NewRecorder(), req)
			if len(log) != 1 {
				t.Fatalf("sent %d, want 1", len(log))
			}
			s := log[0]
			if s.crit != tt.wantCrit || s.tenant != tt.wantTenant {
				t.Errorf("backend heard %s/%q, want %s/%q", s.crit, s.tenant, tt.wantCrit, tt.wantTenant)
			}
			// 500 ms budget minus a 10 ms margin, less the time spent.
			ms, ok := wire.ParseTimeoutMs([]string{s.timeoutMs})
			if !ok || ms > 490*time.Millisecond || ms < 400*time.Millisecond {
				t.Errorf("Levee-Timeout-Ms %q, want at most 490 ms", s.timeoutMs)
			}
			if rs := h.Status().Routes; len(rs) != 1 || rs[0].Route != tt.wantRoute {
				t.Errorf("routes %+v, want one, %q", rs, tt.wantRoute)
			}
		})
	}
}

// TestLoadHeader: a backend's Levee-Load is read and not passed on.
func TestLoadHeader(t *testing.T) {
	var mu sync.Mutex
	var log []sent
	b := &scripted{addr: "a.test:80", mu: &mu, log: &log, answer: func(r *http.Request, _ string) (*http.Response, error) {
		return respond(r, 200, wire.Load, "0.750"), nil
	}}
	cfg := DefaultConfig()
	cfg.Backends.Static = []Endpoint{{Address: b.addr}}
	h, err := New(cfg, WithTransport(func(string) http.RoundTripper { return b }), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/r", nil))
	if got := rec.Header().Get(wire.Load); got != "" {
		t.Errorf("caller received Levee-Load %q, want none", got)
	}
	if got := h.Status().Backends[0].Load; got < 0.7 || got > 0.75 {
		t.Errorf("backend load %v, want 0.75 (barely faded)", got)
	}
}

// TestJudge: overload (503, 504, no headers in time) and failure (refused,
// reset, 500, 502) are told apart; the throttle hears outbound's rule.
func TestJudge(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	for _, tt := range []struct {
		code int
		kv   []string
		want outcome
	}{
		{200, nil, answered}, {404, nil, answered}, {429, nil, answered},
		{503, nil, overloaded}, {503, []string{wire.Reject, "overloaded; no-retry"}, overloaded},
		{504, nil, overloaded}, {504, []string{wire.Reject, "deadline"}, answered},
		{500, nil, failed}, {502, nil, failed},
	} {
		if got, _, _ := judgeResponse(respond(r, tt.code, tt.kv...)); got != tt.want {
			t.Errorf("%d %v: %v, want %v", tt.code, tt.kv, got, tt.want)
		}
	}
	ctx := context.Background()
	for _, tt := range []struct {
		err  error
		want outcome
		kind failKind
	}{
		{errRefused, failed, failUnreachable},
		{timeoutErr{}, overloaded, failTimeout},
		{errors.New("read: connection reset by peer"), failed, failReset},
	} {
		if got, _, _, kind := judgeError(ctx, tt.err); got != tt.want || kind != tt.kind {
			t.Errorf("%v: %v/%v, want %v/%v", tt.err, got, failNames[kind], tt.want, failNames[tt.kind])
		}
	}
}
