package leveehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/retry"
)

// t0 is the virtual "now" of the handler tests; it lies in the future so
// that context deadlines derived from it have not passed in real time.
var t0 = time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)

// countingBody counts reads and closes of a request or response body.
type countingBody struct {
	r      io.Reader
	reads  atomic.Int64
	closes atomic.Int64
}

func newCountingBody(s string) *countingBody { return &countingBody{r: strings.NewReader(s)} }

func (b *countingBody) Read(p []byte) (int, error) {
	b.reads.Add(1)
	return b.r.Read(p)
}

func (b *countingBody) Close() error {
	b.closes.Add(1)
	return nil
}

// seen is what the next handler observed.
type seen struct {
	called   bool
	call     levee.Call
	deadline time.Time
	hasDL    bool
	level    degrade.Level
}

func recordingNext(s *seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.called = true
		s.call = levee.CallFrom(r.Context())
		s.deadline, s.hasDL = r.Context().Deadline()
		s.level = degrade.FromContext(r.Context())
	})
}

// testHandler builds a Handler on a fixed clock whose controller is replaced
// by admitErr (nil admits) and records Done's errors in dones.
func testHandler(next http.Handler, admitErr error, dones *[]error, opts ...HandlerOption) *Handler {
	opts = append([]HandlerOption{func(c *handlerConfig) { c.now = func() time.Time { return t0 } }}, opts...)
	h := NewHandler(next, nil, opts...)
	h.admit = func(context.Context) (admit.Ticket, error) { return admit.Ticket{}, admitErr }
	h.done = func(_ *admit.Ticket, err error) {
		if dones != nil {
			*dones = append(*dones, err)
		}
	}
	return h
}

// peer4 is the address of most callers of TestHandlerHeaders: the call's
// Peer when its tenant is the caller's network.
var peer4 = netip.MustParseAddr("192.0.2.7")

func TestHandlerHeaders(t *testing.T) {
	trustAll := WithTrust(func(*http.Request) bool { return true })
	byAuth := WithTenant(func(r *http.Request) string { return r.Header.Get("X-User") })
	tests := []struct {
		name    string
		opts    []HandlerOption
		header  map[string][]string
		remote  string
		want    levee.Call
		wantDL  time.Duration // 0: no deadline
		wantRej int           // 0: next called
	}{
		{name: "no headers", remote: "192.0.2.7:1234",
			want: levee.Call{Criticality: levee.Critical, Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "untrusted may lower", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Criticality": {"SHEDDABLE"}},
			want:   levee.Call{Criticality: levee.Sheddable, Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "untrusted cannot raise", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Criticality": {"CRITICAL_PLUS"}},
			want:   levee.Call{Criticality: levee.Critical, Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "untrusted number 4 capped", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Criticality": {"4"}},
			want:   levee.Call{Criticality: levee.Critical, Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "trusted may raise", opts: []HandlerOption{trustAll}, remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Criticality": {"CRITICAL_PLUS"}},
			want:   levee.Call{Criticality: levee.CriticalPlus, Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "malformed criticality is default", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Criticality": {"URGENT!!"}},
			want:   levee.Call{Criticality: levee.Critical, Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "untrusted tenant header ignored", remote: "[2001:db8:1:2::77]:9",
			header: map[string][]string{"Levee-Tenant": {"victim"}},
			want:   levee.Call{Tenant: "2001:db8:1:2::/64", Peer: netip.MustParseAddr("2001:db8:1:2::77")}},
		{name: "trusted tenant header", opts: []HandlerOption{trustAll}, remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Tenant": {"acme"}},
			want:   levee.Call{Tenant: "acme"}},
		{name: "trusted hostile tenant falls back", opts: []HandlerOption{trustAll}, remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Tenant": {"a\x01b"}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "tenant function", opts: []HandlerOption{byAuth}, remote: "192.0.2.7:1",
			header: map[string][]string{"X-User": {"alice"}, "Levee-Tenant": {"victim"}},
			want:   levee.Call{Tenant: "alice"}},
		{name: "tenant function empty falls back", opts: []HandlerOption{byAuth}, remote: "192.0.2.7:1",
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "attempt trusted", opts: []HandlerOption{trustAll}, remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Attempt": {"2"}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Attempt: 2, Peer: peer4}},
		{name: "attempt untrusted ignored", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Attempt": {"2"}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "attempt hostile", opts: []HandlerOption{trustAll}, remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Attempt": {"-4", "NaN"}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "timeout ms", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Timeout-Ms": {"250"}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}, wantDL: 250 * time.Millisecond},
		{name: "timeout min of all valid", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Timeout-Ms": {"900", "x"}, "Grpc-Timeout": {"300m"}, "X-Envoy-Expected-Rq-Timeout-Ms": {"400"}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}, wantDL: 300 * time.Millisecond},
		{name: "timeout malformed ignored", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Timeout-Ms": {"1.5", "NaN", "１"}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}},
		{name: "timeout huge clamped", remote: "192.0.2.7:1",
			header: map[string][]string{"Levee-Timeout-Ms": {strings.Repeat("9", 100)}},
			want:   levee.Call{Tenant: "192.0.2.0/24", Peer: peer4}, wantDL: 24 * time.Hour},
		{name: "timeout zero is 504", remote: "192.0.2.7:1",
			header:  map[string][]string{"Levee-Timeout-Ms": {"0"}},
			wantRej: http.StatusGatewayTimeout},
		{name: "timeout negative is 504", remote: "192.0.2.7:1",
			header:  map[string][]string{"Levee-Timeout-Ms": {"500", "-3"}},
			wantRej: http.StatusGatewayTimeout},
		{name: "grpc timeout zero is 504", remote: "192.0.2.7:1",
			header:  map[string][]string{"Grpc-Timeout": {"0n"}},
			wantRej: http.StatusGatewayTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s seen
			h := testHandler(recordingNext(&s), nil, nil, tt.opts...)
			body := newCountingBody("payload")
			r := httptest.NewRequest("POST", "/work", body)
			r.RemoteAddr = tt.remote
			for k, v := range tt.header {
				r.Header[k] = v
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if tt.wantRej != 0 {
				if w.Code != tt.wantRej || s.called {
					t.Fatalf("status %d, next called %v; want %d, not called", w.Code, s.called, tt.wantRej)
				}
				if got := w.Header().Get("Levee-Reject"); got != "deadline; no-retry" {
					t.Errorf("Levee-Reject = %q; want deadline; no-retry", got)
				}
				if n := body.reads.Load(); n != 0 {
					t.Errorf("rejected request's body read %d times; want 0", n)
				}
				return
			}
			if !s.called {
				t.Fatalf("next not called; status %d", w.Code)
			}
			if s.call != tt.want {
				t.Errorf("call = %+v; want %+v", s.call, tt.want)
			}
			if tt.wantDL == 0 && s.hasDL {
				t.Errorf("deadline %v; want none", s.deadline)
			}
			if tt.wantDL != 0 && (!s.hasDL || !s.deadline.Equal(t0.Add(tt.wantDL))) {
				t.Errorf("deadline %v (%v); want now+%v", s.deadline, s.hasDL, tt.wantDL)
			}
		})
	}
}

func TestHandlerDeadlineIsEarlier(t *testing.T) {
	tests := []struct {
		name             string
		server, callerMs time.Duration
		want             time.Duration
	}{
		{"caller earlier", time.Hour, time.Minute, time.Minute},
		{"server earlier", 30 * time.Second, time.Minute, 30 * time.Second},
	}
	for _, tt := range tests {
		var s seen
		h := testHandler(recordingNext(&s), nil, nil)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Levee-Timeout-Ms", formatMs(tt.callerMs))
		ctx, cancel := context.WithDeadline(context.Background(), t0.Add(tt.server))
		h.ServeHTTP(httptest.NewRecorder(), r.WithContext(ctx))
		cancel()
		if !s.hasDL || !s.deadline.Equal(t0.Add(tt.want)) {
			t.Errorf("%s: deadline = %v; want t0+%v", tt.name, s.deadline, tt.want)
		}
	}
}

func formatMs(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func TestHandlerRejections(t *testing.T) {
	tests := []struct {
		name       string
		err        error
		wantStatus int
		wantReject string
		wantDelay  time.Duration // 0: no Retry-After
	}{
		{"overloaded", &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 4 * time.Second}, 503, "overloaded", 4 * time.Second},
		{"overloaded no advice", &levee.RejectedError{Reason: levee.Overloaded}, 503, "overloaded", DefaultRetryAfter},
		{"overloaded no retry", &levee.RejectedError{Reason: levee.Overloaded, NoRetry: true, RetryAfter: time.Second}, 503, "overloaded; no-retry", time.Second},
		{"quota", &levee.RejectedError{Reason: levee.Quota, RetryAfter: 2 * time.Second}, 429, "quota", 2 * time.Second},
		{"deadline", &levee.RejectedError{Reason: levee.Deadline}, 504, "deadline", 0},
		{"throttled", &levee.RejectedError{Reason: levee.Throttled}, 503, "overloaded; no-retry", DefaultRetryAfter},
		{"foreign error", errors.New("boom"), 503, "overloaded; no-retry", DefaultRetryAfter},
	}
	for _, tt := range tests {
		for _, u := range []uint64{0, 1 << 63, ^uint64(0)} {
			t.Run(tt.name, func(t *testing.T) {
				var s seen
				var dones []error
				h := testHandler(recordingNext(&s), tt.err, &dones, WithRand(func() uint64 { return u }))
				body := newCountingBody(strings.Repeat("x", 1<<16))
				r := httptest.NewRequest("POST", "/upload", body)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if s.called {
					t.Fatal("next called for a rejected request")
				}
				if n := body.reads.Load(); n != 0 {
					t.Errorf("body read %d times; want 0", n)
				}
				if len(dones) != 0 {
					t.Errorf("Done called %d times for a rejected request; want 0", len(dones))
				}
				if w.Code != tt.wantStatus {
					t.Errorf("status = %d; want %d", w.Code, tt.wantStatus)
				}
				if got := w.Header().Get("Levee-Reject"); got != tt.wantReject {
					t.Errorf("Levee-Reject = %q; want %q", got, tt.wantReject)
				}
				ra, ms := w.Header().Get("Retry-After"), w.Header().Get("Levee-Retry-After-Ms")
				if tt.wantDelay == 0 {
					if ra != "" || ms != "" {
						t.Errorf("Retry-After %q, Levee-Retry-After-Ms %q; want none", ra, ms)
					}
					return
				}
				msN, err := strconv.Atoi(ms)
				lo, hi := tt.wantDelay*3/4, tt.wantDelay*5/4
				if err != nil || time.Duration(msN)*time.Millisecond < lo || time.Duration(msN)*time.Millisecond > hi {
					t.Errorf("Levee-Retry-After-Ms = %q; want within [%v, %v]", ms, lo, hi)
				}
				raN, err := strconv.Atoi(ra)
				if err != nil || raN < 1 || time.Duration(raN)*time.Second < time.Duration(msN)*time.Millisecond || time.Duration(raN-1)*time.Second >= time.Duration(msN)*time.Millisecond {
					t.Errorf("Retry-After = %q with ms %q; want whole seconds ≥ 1 rounding the ms up", ra, ms)
				}
			})
		}
	}
}

func TestHandlerCallerGone(t *testing.T) {
	var s seen
	admitted := false
	h := testHandler(recordingNext(&s), nil, nil)
	h.admit = func(context.Context) (admit.Ticket, error) { admitted = true; return admit.Ticket{}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if s.called || admitted {
		t.Errorf("next called %v, admitted %v; want neither for a cancelled request", s.called, admitted)
	}
	if w.Code != http.StatusGatewayTimeout {
		t.Errorf("status = %d; want 504", w.Code)
	}
}

func TestHandlerHealthNeverShed(t *testing.T) {
	overloaded := &levee.RejectedError{Reason: levee.Overloaded}
	tests := []struct {
		name     string
		opts     []HandlerOption
		method   string
		path     string
		wantNext bool
	}{
		{"healthz", nil, "GET", "/healthz", true},
		{"readyz", nil, "GET", "/readyz", true},
		{"livez HEAD", nil, "HEAD", "/livez", true},
		{"POST on a probe path is admitted", nil, "POST", "/healthz", false},
		{"DELETE on a probe path is admitted", nil, "DELETE", "/readyz", false},
		{"other path shed", nil, "GET", "/api", false},
		{"prefix is not health", nil, "GET", "/healthz/deep", false},
		{"custom", []HandlerOption{WithHealthPaths("/ping")}, "GET", "/ping", true},
		{"custom replaces defaults", []HandlerOption{WithHealthPaths("/ping")}, "GET", "/healthz", false},
		{"defaults extended", []HandlerOption{WithHealthPaths(append(DefaultHealthPaths(), "/ping")...)}, "GET", "/healthz", true},
		{"none", []HandlerOption{WithHealthPaths()}, "GET", "/healthz", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s seen
			h := testHandler(recordingNext(&s), overloaded, nil, tt.opts...)
			r := httptest.NewRequest(tt.method, tt.path, nil)
			r.Header.Set("Levee-Timeout-Ms", "0")
			h.ServeHTTP(httptest.NewRecorder(), r)
			if s.called != tt.wantNext {
				t.Errorf("next called = %v; want %v", s.called, tt.wantNext)
			}
			if want := map[bool]uint64{true: 1}[tt.wantNext]; h.Probes() != want {
				t.Errorf("Probes() = %d, want %d", h.Probes(), want)
			}
		})
	}
	if got, want := DefaultHealthPaths(), []string{"/healthz", "/readyz", "/livez"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DefaultHealthPaths() = %v, want %v", got, want)
	}
	DefaultHealthPaths()[0] = "/mutated"
	if DefaultHealthPaths()[0] != "/healthz" {
		t.Error("DefaultHealthPaths returns a shared slice")
	}
}

func TestHandlerDoesNotMutateRequest(t *testing.T) {
	h := testHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil, nil)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Levee-Timeout-Ms", "100")
	r.Header.Set("Levee-Criticality", "CRITICAL_PLUS")
	ctx := r.Context()
	before := r.Header.Clone()
	h.ServeHTTP(httptest.NewRecorder(), r)
	if r.Context() != ctx {
		t.Error("request context replaced")
	}
	if len(r.Header) != len(before) {
		t.Errorf("header = %v; want %v", r.Header, before)
	}
	for k, v := range before {
		if r.Header.Get(k) != v[0] {
			t.Errorf("header %s = %q; want %q", k, r.Header.Get(k), v[0])
		}
	}
}

func TestHandlerOutcome(t *testing.T) {
	downOverload := &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 2 * time.Second}
	tests := []struct {
		name       string
		next       func(w http.ResponseWriter, r *http.Request)
		wantStatus int
		wantReject string
		wantDone   error
	}{
		{"success", func(w http.ResponseWriter, r *http.Request) {}, 200, "", nil},
		{"404 is success", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, 404, "", nil},
		{"500 is failure", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, 500, "", errServerError},
		{"explicit Error", func(w http.ResponseWriter, r *http.Request) { Error(w, r, downOverload) }, 503, "overloaded; no-retry", downOverload},
		{"recorded downstream then 502", func(w http.ResponseWriter, r *http.Request) {
			stateFrom(r.Context()).downstream.CompareAndSwap(nil, downOverload)
			w.WriteHeader(http.StatusBadGateway)
		}, 503, "overloaded; no-retry", downOverload},
		{"recorded downstream then fallback 200", func(w http.ResponseWriter, r *http.Request) {
			stateFrom(r.Context()).downstream.CompareAndSwap(nil, downOverload)
			_, _ = io.WriteString(w, "from cache")
		}, 200, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dones []error
			h := testHandler(http.HandlerFunc(tt.next), nil, &dones)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != tt.wantStatus {
				t.Errorf("status = %d; want %d", w.Code, tt.wantStatus)
			}
			if got := w.Header().Get("Levee-Reject"); got != tt.wantReject {
				t.Errorf("Levee-Reject = %q; want %q", got, tt.wantReject)
			}
			if len(dones) != 1 || dones[0] != tt.wantDone {
				t.Errorf("Done(%v); want exactly Done(%v)", dones, tt.wantDone)
			}
		})
	}
}

func TestHandlerPanicReportsFailure(t *testing.T) {
	var dones []error
	h := testHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), nil, &dones)
	func() {
		defer func() { _ = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}()
	if len(dones) != 1 || dones[0] != errServerError {
		t.Errorf("Done(%v); want Done(errServerError) once", dones)
	}
}

func TestHandlerDegradeLevel(t *testing.T) {
	for _, lvl := range []degrade.Level{0, 2} {
		d := degrade.New()
		if lvl > 0 {
			d.Force(lvl, time.Now().Add(time.Hour))
		}
		var s seen
		ctl := admit.New(admit.WithDegrade(d))
		ctl.Step(time.Now())
		h := NewHandler(recordingNext(&s), ctl)
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		if s.level != lvl {
			t.Errorf("degrade level in ctx = %d; want %d", s.level, lvl)
		}
	}
}

type fakeQueue struct{ got []time.Duration }

func (q *fakeQueue) Observe(d time.Duration) { q.got = append(q.got, d) }

func TestHandlerLoadAndQueue(t *testing.T) {
	q := &fakeQueue{}
	h := testHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil, nil, WithLoadHeader(true), WithQueueDelay(q))
	h.load = func() float64 { return 0.8512 }
	for i := 0; i < 2; i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		if got := w.Header().Get("Levee-Load"); got != "0.851" {
			t.Errorf("Levee-Load = %q; want 0.851", got)
		}
	}
	if len(q.got) != 2 || q.got[0] != 0 {
		t.Errorf("queue delays %v; want two 0s (no listener: arrival = handler start)", q.got)
	}
}

func TestMidTierTable(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantReason  levee.Reason // 0: nil
		wantNoRetry bool
		wantDelay   time.Duration
	}{
		{"nil", nil, 0, false, 0},
		{"application error", errors.New("boom"), 0, false, 0},
		{"overloaded keeps delay", &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 3 * time.Second}, levee.Overloaded, true, 3 * time.Second},
		{"overloaded wrapped", fmt.Errorf("calling x: %w", levee.ErrOverloaded), levee.Overloaded, true, 0},
		{"throttled", levee.ErrThrottled, levee.Overloaded, true, 0},
		{"budget exhausted", &retry.GiveUpError{Err: &levee.RejectedError{Reason: levee.Overloaded}, Attempts: 1, Stop: retry.StopBudget}, levee.Overloaded, true, 0},
		{"quota passed through", &levee.RejectedError{Reason: levee.Quota, RetryAfter: 2 * time.Second}, levee.Quota, false, 2 * time.Second},
		{"deadline", levee.ErrDeadline, levee.Deadline, true, 0},
		{"context deadline", context.DeadlineExceeded, levee.Deadline, true, 0},
		{"context canceled", fmt.Errorf("x: %w", context.Canceled), levee.Deadline, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MidTier(tt.err)
			if tt.wantReason == 0 {
				if got != nil {
					t.Fatalf("MidTier(%v) = %v; want nil", tt.err, got)
				}
				w := httptest.NewRecorder()
				Error(w, httptest.NewRequest("GET", "/", nil), tt.err)
				if tt.err != nil && w.Code != http.StatusBadGateway {
					t.Errorf("Error(%v) status %d; want 502", tt.err, w.Code)
				}
				return
			}
			if got == nil || got.Reason != tt.wantReason || got.NoRetry != tt.wantNoRetry || got.RetryAfter != tt.wantDelay {
				t.Fatalf("MidTier(%v) = %+v; want %v no-retry %v delay %v", tt.err, got, tt.wantReason, tt.wantNoRetry, tt.wantDelay)
			}
			w := httptest.NewRecorder()
			Error(w, httptest.NewRequest("GET", "/", nil), tt.err)
			if want := map[levee.Reason]int{levee.Overloaded: 503, levee.Quota: 429, levee.Deadline: 504}[tt.wantReason]; w.Code != want {
				t.Errorf("Error(%v) status %d; want %d", tt.err, w.Code, want)
			}
		})
	}
}

// TestHandlerCountsItsOwnRejections: the rejections the Handler decides
// before admission (a budget already spent, a caller already gone) are
// counted once in the controller, with their criticality, where every
// other rejection is (Snapshot.Rejected, the metrics, the status page).
func TestHandlerCountsItsOwnRejections(t *testing.T) {
	ctl := admit.New()
	h := NewHandler(okHandler, ctl, WithTrust(func(r *http.Request) bool { return r.Header.Get("X-Trusted") != "" }))
	send := func(crit, timeoutMs string, trusted, gone bool) int {
		r := httptest.NewRequest("GET", "/api", nil)
		r.Header.Set("Levee-Criticality", crit)
		if timeoutMs != "" {
			r.Header.Set("Levee-Timeout-Ms", timeoutMs)
		}
		if trusted {
			r.Header.Set("X-Trusted", "1")
		}
		if gone {
			ctx, cancel := context.WithCancel(r.Context())
			cancel()
			r = r.WithContext(ctx)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct {
		crit, timeout   string
		trusted, gone   bool
		wantCode        int
		wantCriticality levee.Criticality
	}{
		{"CRITICAL_PLUS", "0", true, false, 504, levee.CriticalPlus},
		{"CRITICAL_PLUS", "-1", false, false, 504, levee.Critical}, // untrusted: capped
		{"SHEDDABLE", "", false, true, 504, levee.Sheddable},
		{"SHEDDABLE", "5000", false, false, 200, levee.Sheddable},
	} {
		if got := send(c.crit, c.timeout, c.trusted, c.gone); got != c.wantCode {
			t.Errorf("%+v: status %d, want %d", c, got, c.wantCode)
		}
	}
	s := ctl.Snapshot()
	want := [levee.NumCriticalities]uint64{levee.CriticalPlus: 1, levee.Critical: 1, levee.Sheddable: 1}
	for cr := range levee.NumCriticalities {
		if got := s.Rejected[cr][levee.Deadline]; got != want[cr] {
			t.Errorf("%v: %d deadline rejections counted, want %d", levee.Criticality(cr), got, want[cr])
		}
	}
	if s.Admitted[levee.Sheddable] != 1 {
		t.Errorf("%d SHEDDABLE admitted, want 1", s.Admitted[levee.Sheddable])
	}
}
