package leveehttp

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// fakeBackend is a RoundTripper that answers from a script, records what it
// received and hands out counting bodies.
type fakeBackend struct {
	mu     sync.Mutex
	script func(n int, r *http.Request) *http.Response
	got    []*http.Request
	bodies [][]byte
	resps  []*countingBody
}

func (f *fakeBackend) RoundTrip(r *http.Request) (*http.Response, error) {
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	f.mu.Lock()
	n := len(f.got)
	f.got = append(f.got, r)
	f.bodies = append(f.bodies, b)
	f.mu.Unlock()
	resp := f.script(n, r)
	cb := newCountingBody("response body")
	resp.Body = cb
	resp.Request = r
	f.mu.Lock()
	f.resps = append(f.resps, cb)
	f.mu.Unlock()
	return resp, nil
}

func (f *fakeBackend) unclosed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, b := range f.resps {
		if b.closes.Load() == 0 {
			n++
		}
	}
	return n
}

func answer(code int, hdr ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(hdr); i += 2 {
		h.Set(hdr[i], hdr[i+1])
	}
	return &http.Response{StatusCode: code, Header: h}
}

func always(resp func() *http.Response) func(int, *http.Request) *http.Response {
	return func(int, *http.Request) *http.Response { return resp() }
}

func overloaded(extra ...string) func() *http.Response {
	return func() *http.Response {
		return answer(503, append([]string{"Levee-Reject", "overloaded", "Levee-Retry-After-Ms", "20"}, extra...)...)
	}
}

// testTransport returns a Transport on virtual time: waits advance the
// clock instead of sleeping and are recorded.
func testTransport(next http.RoundTripper, opts ...TransportOption) (*Transport, *[]time.Duration) {
	return testTransportAt(t0, next, opts...)
}

// testTransportAt is testTransport on a clock that starts at start: the
// real time, for a test whose contexts and servers are real.
func testTransportAt(start time.Time, next http.RoundTripper, opts ...TransportOption) (*Transport, *[]time.Duration) {
	var mu sync.Mutex
	now := start
	var waits []time.Duration
	base := []TransportOption{func(c *transportConfig) {
		c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		c.wait = func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			defer mu.Unlock()
			waits = append(waits, d)
			now = now.Add(d)
			return nil
		}
		c.policy = retry.Policy{Budget: retry.Unlimited(), Rand: func() uint64 { return 1 << 62 }}
	}}
	return NewTransport(next, append(base, opts...)...), &waits
}

func ctxWithin(d time.Duration, call levee.Call) (context.Context, context.CancelFunc) {
	return context.WithDeadline(levee.WithCall(context.Background(), call), t0.Add(d))
}

func TestTransportPropagates(t *testing.T) {
	tests := []struct {
		name     string
		call     levee.Call
		deadline time.Duration // 0: none
		want     map[string]string
	}{
		{"defaults", levee.Call{}, 0, map[string]string{
			"Levee-Criticality": "CRITICAL", "Levee-Tenant": "", "Levee-Attempt": "0",
			"Levee-Timeout-Ms": "9990"}}, // retry.DefaultTimeout minus the margin
		{"call and deadline", levee.Call{Criticality: levee.SheddablePlus, Tenant: "acme", Attempt: 5}, time.Second, map[string]string{
			"Levee-Criticality": "SHEDDABLE_PLUS", "Levee-Tenant": "acme", "Levee-Attempt": "0",
			"Levee-Timeout-Ms": "990"}},
		{"short deadline shaves a tenth", levee.Call{Criticality: levee.CriticalPlus}, 50 * time.Millisecond, map[string]string{
			"Levee-Criticality": "CRITICAL_PLUS", "Levee-Timeout-Ms": "45"}},
		{"long tenant hashed", levee.Call{Tenant: strings.Repeat("t", 100)}, time.Second, map[string]string{
			"Levee-Tenant": "h~"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb := &fakeBackend{script: always(func() *http.Response { return answer(200) })}
			tr, _ := testTransport(fb, WithHosts("backend"))
			ctx := levee.WithCall(context.Background(), tt.call)
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, t0.Add(tt.deadline))
				defer cancel()
			}
			req := httptest.NewRequest("GET", "http://backend/x", nil).WithContext(ctx)
			req.RequestURI = ""
			req.Header.Set("Levee-Tenant", "forged")
			before := req.Header.Clone()
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := fb.got[0].Header
			for k, v := range tt.want {
				if k == "Levee-Tenant" && v == "h~" {
					if !strings.HasPrefix(got.Get(k), "h~") {
						t.Errorf("%s = %q; want a hash", k, got.Get(k))
					}
					continue
				}
				if got.Get(k) != v {
					t.Errorf("%s = %q; want %q", k, got.Get(k), v)
				}
			}
			if req.Header.Get("Levee-Tenant") != before.Get("Levee-Tenant") || len(req.Header) != len(before) {
				t.Errorf("caller's request modified: %v", req.Header)
			}
			// Without the caller's deadline, the Policy's Timeout bounds
			// the wait for the response, not the body: no context
			// deadline, but a budget sent all the same.
			if _, ok := fb.got[0].Context().Deadline(); ok != (tt.deadline > 0) {
				t.Errorf("request context has a deadline: %v, want %v", ok, tt.deadline > 0)
			}
		})
	}
}

func TestTransportRejections(t *testing.T) {
	tests := []struct {
		name         string
		resp         func() *http.Response
		wantAttempts int
		wantReason   levee.Reason // 0: a response, no error
		wantNoRetry  bool
		wantDelay    time.Duration
	}{
		// A no-retry rejection carries no delay to levee clients (as in
		// leveegrpc); having given up, the Transport says no-retry upward.
		{"overloaded retried then no-retry", overloaded(), 3, levee.Overloaded, true, 0},
		{"overloaded no-retry not retried", overloaded("Levee-Reject", "overloaded; no-retry"), 1, levee.Overloaded, true, 0},
		{"quota with delay retried", func() *http.Response { return answer(429, "Levee-Reject", "quota", "Retry-After", "1") }, 3, levee.Quota, false, time.Second},
		{"quota delay past deadline", func() *http.Response { return answer(429, "Levee-Reject", "quota", "Levee-Retry-After-Ms", "60000") }, 1, levee.Quota, false, time.Minute},
		{"deadline not retried", func() *http.Response { return answer(504, "Levee-Reject", "deadline") }, 1, levee.Deadline, false, 0},
		// A third party's own answers are responses, body included.
		{"plain 429 is a response", func() *http.Response { return answer(429, "Retry-After", "1") }, 1, 0, false, 0},
		{"plain 504 is a response", func() *http.Response { return answer(504) }, 1, 0, false, 0},
		{"plain 503 is a response", func() *http.Response { return answer(503) }, 1, 0, false, 0},
		{"500 is a response", func() *http.Response { return answer(500) }, 1, 0, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb := &fakeBackend{script: always(tt.resp)}
			tr, _ := testTransport(fb, WithThrottle(nil))
			ctx, cancel := ctxWithin(10*time.Second, levee.Call{})
			defer cancel()
			client := &http.Client{Transport: tr}
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend/", nil)
			resp, err := client.Do(req)
			if len(fb.got) != tt.wantAttempts {
				t.Errorf("attempts = %d; want %d", len(fb.got), tt.wantAttempts)
			}
			for i, r := range fb.got {
				if got := r.Header.Get("Levee-Attempt"); got != string(rune('0'+i)) {
					t.Errorf("attempt %d sent Levee-Attempt %q", i, got)
				}
			}
			if tt.wantReason == 0 {
				if err != nil {
					t.Fatalf("err = %v; want a response", err)
				}
				resp.Body.Close()
			} else {
				var ue *url.Error
				if !errors.As(err, &ue) {
					t.Fatalf("err = %v; want a *url.Error", err)
				}
				rej := levee.AsRejected(err)
				if rej == nil || rej.Reason != tt.wantReason || rej.NoRetry != tt.wantNoRetry || rej.RetryAfter != tt.wantDelay {
					t.Fatalf("rejection = %+v; want reason %v, no-retry %v, delay %v", rej, tt.wantReason, tt.wantNoRetry, tt.wantDelay)
				}
			}
			if n := fb.unclosed(); n != 0 {
				t.Errorf("%d response bodies left unclosed", n)
			}
		})
	}
}

func TestTransportHonoursPushback(t *testing.T) {
	fb := &fakeBackend{script: func(n int, _ *http.Request) *http.Response {
		if n < 2 {
			return answer(503, "Levee-Reject", "overloaded", "Levee-Retry-After-Ms", "700", "Retry-After", "9")
		}
		return answer(200)
	}}
	tr, waits := testTransport(fb, WithThrottle(nil))
	ctx, cancel := ctxWithin(10*time.Second, levee.Call{})
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(*waits) != 2 {
		t.Fatalf("waits = %v; want 2", *waits)
	}
	for _, w := range *waits {
		if w < 700*time.Millisecond {
			t.Errorf("waited %v; want ≥ the server's 700ms (Levee-Retry-After-Ms wins over Retry-After)", w)
		}
	}
}

func TestTransportBodies(t *testing.T) {
	payload := []byte(strings.Repeat("levee-body-", 1000))
	tests := []struct {
		name         string
		getBody      bool
		method       string
		key          bool
		wantAttempts int
	}{
		{"PUT with GetBody replayed", true, "PUT", false, 3},
		{"PUT without GetBody not retried", false, "PUT", false, 1},
		{"POST not idempotent", true, "POST", false, 1},
		{"POST with idempotency key replayed", true, "POST", true, 3},
		{"POST with key but no GetBody", false, "POST", true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb := &fakeBackend{script: always(overloaded())}
			tr, _ := testTransport(fb, WithThrottle(nil))
			ctx, cancel := ctxWithin(10*time.Second, levee.Call{})
			defer cancel()
			first := &countingBody{r: bytes.NewReader(payload)}
			req, _ := http.NewRequestWithContext(ctx, tt.method, "http://backend/", first)
			req.ContentLength = int64(len(payload))
			var replays []*countingBody
			if tt.getBody {
				req.GetBody = func() (io.ReadCloser, error) {
					b := &countingBody{r: bytes.NewReader(payload)}
					replays = append(replays, b)
					return b, nil
				}
			}
			if tt.key {
				req.Header.Set("Idempotency-Key", "k1")
			}
			_, err := tr.RoundTrip(req)
			if !errors.Is(err, levee.ErrOverloaded) {
				t.Fatalf("err = %v; want overloaded", err)
			}
			if len(fb.got) != tt.wantAttempts {
				t.Fatalf("attempts = %d; want %d", len(fb.got), tt.wantAttempts)
			}
			for i, b := range fb.bodies {
				if !bytes.Equal(b, payload) {
					t.Errorf("attempt %d sent %d bytes; want the identical %d", i, len(b), len(payload))
				}
			}
			for i, b := range append([]*countingBody{first}, replays...) {
				if b.closes.Load() == 0 {
					t.Errorf("request body %d not closed", i)
				}
			}
			if n := fb.unclosed(); n != 0 {
				t.Errorf("%d response bodies left unclosed", n)
			}
		})
	}
}

func TestTransportBudget(t *testing.T) {
	// A backend that rejects everything, 200 requests, a budget of 10% with
	// no floor: at most 20 retries reach it (plus races: none here).
	fb := &fakeBackend{script: always(overloaded())}
	budget := retry.NewBudget(retry.WithRatio(0.1, 10*time.Second), retry.WithFloor(0, 0))
	tr, _ := testTransport(fb, WithThrottle(nil), WithPolicy(retry.Policy{Budget: budget, Rand: func() uint64 { return 0 }}))
	const requests = 200
	for i := 0; i < requests; i++ {
		ctx, cancel := ctxWithin(time.Hour, levee.Call{})
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend/", nil)
		_, err := tr.RoundTrip(req)
		cancel()
		if rej := levee.AsRejected(err); rej == nil || !rej.NoRetry && len(fb.got) > i+1 {
			t.Fatalf("request %d: err = %v; want an overload rejection", i, err)
		}
	}
	retries := len(fb.got) - requests
	if retries > requests/10 {
		t.Errorf("%d retries for %d requests; want ≤ 10%%", retries, requests)
	}
	if retries == 0 {
		t.Errorf("no retries at all; want the budget to allow some")
	}
}

func TestTransportThrottles(t *testing.T) {
	// Offered 300 requests over 3 s of virtual time to a backend rejecting
	// everything: the adaptive throttle refuses most of them locally, and a
	// refused request never reaches the backend.
	fb := &fakeBackend{script: always(overloaded())}
	var mu sync.Mutex
	now := t0
	tr := NewTransport(fb, WithThrottle(throttle.NewGroup()), WithPolicy(retry.Policy{MaxAttempts: 1}),
		func(c *transportConfig) { c.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now } })
	throttled := 0
	for i := 0; i < 300; i++ {
		mu.Lock()
		now = now.Add(10 * time.Millisecond)
		mu.Unlock()
		ctx, cancel := ctxWithin(time.Hour, levee.Call{Criticality: levee.Sheddable})
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend/", nil)
		before := len(fb.got)
		_, err := tr.RoundTrip(req)
		cancel()
		if errors.Is(err, levee.ErrThrottled) {
			throttled++
			if len(fb.got) != before {
				t.Fatalf("throttled request %d touched the backend", i)
			}
		}
	}
	if throttled < 100 || len(fb.got)+throttled != 300 {
		t.Errorf("throttled %d, sent %d of 300; want most throttled locally", throttled, len(fb.got))
	}
}

func TestTransportLocalDeadline(t *testing.T) {
	fb := &fakeBackend{script: always(func() *http.Response { return answer(200) })}
	tr, _ := testTransport(fb)
	ctx, cancel := ctxWithin(500*time.Microsecond, levee.Call{})
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend/", nil)
	_, err := tr.RoundTrip(req)
	if !errors.Is(err, levee.ErrDeadline) || len(fb.got) != 0 {
		t.Errorf("err = %v after %d sends; want a local deadline rejection without sending", err, len(fb.got))
	}
}

// TestMidTier runs client → mid-tier → backend on httptest servers: the
// backend sheds everything, the mid-tier retries within its policy and
// tells the client "overloaded; no-retry", which the client does not retry.
func TestMidTier(t *testing.T) {
	tests := []struct {
		name     string
		explicit bool
	}{{"automatic", false}, {"Error helper", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var backendHits, midHits sync.Map
			count := func(m *sync.Map, k string) {
				v, _ := m.LoadOrStore(k, new(int))
				*v.(*int)++
			}
			backend := NewHandler(http.NotFoundHandler(), nil)
			backend.admit = func(ctx context.Context) (admit.Ticket, error) {
				count(&backendHits, levee.CallFrom(ctx).Criticality.String())
				return admit.Ticket{}, &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 10 * time.Millisecond}
			}
			bs := httptest.NewServer(backend)
			defer bs.Close()

			down := &http.Client{Transport: NewTransport(nil, WithThrottle(nil), WithPolicy(retry.Policy{Budget: retry.Unlimited(), Base: time.Millisecond}))}
			var dones []error
			var mu sync.Mutex
			mid := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				count(&midHits, r.Header.Get("Levee-Attempt"))
				req, _ := http.NewRequestWithContext(r.Context(), "GET", bs.URL+"/", nil)
				resp, err := down.Do(req)
				if err != nil {
					if tt.explicit {
						Error(w, r, err)
					} else {
						http.Error(w, "bad gateway", http.StatusBadGateway)
					}
					return
				}
				resp.Body.Close()
			}), nil, WithTrust(func(*http.Request) bool { return true }))
			mid.done = func(_ *admit.Ticket, err error) { mu.Lock(); dones = append(dones, err); mu.Unlock() }
			ms := httptest.NewServer(mid)
			defer ms.Close()

			client := &http.Client{Transport: NewTransport(nil, WithThrottle(nil), WithPolicy(retry.Policy{Budget: retry.Unlimited(), Base: time.Millisecond}))}
			ctx, cancel := context.WithTimeout(levee.WithCriticality(context.Background(), levee.SheddablePlus), 5*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "GET", ms.URL+"/", nil)
			_, err := client.Do(req)
			rej := levee.AsRejected(err)
			if rej == nil || rej.Reason != levee.Overloaded || !rej.NoRetry {
				t.Fatalf("client got %v; want overloaded; no-retry", err)
			}
			if n, _ := midHits.Load("1"); n != nil {
				t.Errorf("client retried the mid-tier %d times; want 0", *n.(*int))
			}
			if n, _ := backendHits.Load("SHEDDABLE_PLUS"); n == nil || *n.(*int) != 3 {
				t.Errorf("backend saw %v SHEDDABLE_PLUS attempts; want 3 (the mid-tier's retries only)", n)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(dones) != 1 || !errors.Is(dones[0], levee.ErrOverloaded) {
				t.Errorf("mid-tier Done(%v); want the downstream overload", dones)
			}
		})
	}
}

func TestHeaderNames(t *testing.T) {
	names := HeaderNames{Criticality: "x-prio", Tenant: "X-Customer", TimeoutMs: "x-budget-ms", Attempt: "X-Try", Reject: "X-Why", RetryAfterMs: "X-Later-Ms"}
	var s seen
	var sent http.Header
	backend := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent = r.Header.Clone()
		recordingNext(&s).ServeHTTP(w, r)
		Error(w, r, &levee.RejectedError{Reason: levee.Quota, RetryAfter: time.Second})
	}), nil, WithHeaderNames(names), WithTrust(func(*http.Request) bool { return true }))
	srv := httptest.NewServer(backend)
	defer srv.Close()
	tr := NewTransport(nil, WithTransportHeaderNames(names), WithPolicy(retry.Policy{MaxAttempts: 1}), WithHosts(srv.Listener.Addr().String()))
	ctx, cancel := context.WithTimeout(levee.WithCall(context.Background(), levee.Call{Criticality: levee.CriticalPlus, Tenant: "acme"}), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	_, err := (&http.Client{Transport: tr}).Do(req)
	rej := levee.AsRejected(err)
	if rej == nil || rej.Reason != levee.Quota || rej.RetryAfter < 750*time.Millisecond {
		t.Errorf("err = %v; want quota with the renamed delay header", err)
	}
	if s.call.Criticality != levee.CriticalPlus || s.call.Tenant != "acme" || !s.hasDL {
		t.Errorf("server saw %+v, deadline %v; want CRITICAL_PLUS, acme and a deadline", s.call, s.hasDL)
	}
	for _, k := range []string{"X-Prio", "X-Customer", "X-Budget-Ms", "X-Try"} {
		if sent.Get(k) == "" {
			t.Errorf("header %s not sent: %v", k, sent)
		}
	}
	if sent.Get(HeaderCriticality) != "" {
		t.Errorf("default header still sent: %v", sent)
	}
}

func TestTransportAttemptTimeout(t *testing.T) {
	// The first attempt hangs until its own deadline; the second answers.
	var mu sync.Mutex
	var budgets []string
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		n := len(budgets)
		budgets = append(budgets, r.Header.Get("Levee-Timeout-Ms"))
		mu.Unlock()
		if n == 0 {
			select {
			case <-r.Context().Done():
				return nil, r.Context().Err()
			case <-time.After(10 * time.Second):
				return nil, errors.New("attempt deadline never fired")
			}
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	tr := NewTransport(next, WithThrottle(nil),
		WithPolicy(retry.Policy{AttemptTimeout: 20 * time.Millisecond, Budget: retry.Unlimited(), Rand: func() uint64 { return 0 }}),
		func(c *transportConfig) { c.wait = func(context.Context, time.Duration) error { return nil } })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("err = %v; want the second attempt's response", err)
	}
	resp.Body.Close()
	if len(budgets) != 2 || budgets[0] != "18" && budgets[0] != "19" {
		t.Errorf("attempts sent Levee-Timeout-Ms %v; want two, the first ≈ 20ms minus a tenth", budgets)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTransportConcurrent(t *testing.T) {
	fb := &fakeBackend{script: func(n int, _ *http.Request) *http.Response {
		if n%3 == 0 {
			return overloaded()()
		}
		return answer(200)
	}}
	tr := NewTransport(fb, WithPolicy(retry.Policy{Budget: retry.NewBudget(), Base: time.Microsecond}))
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				req, _ := http.NewRequestWithContext(ctx, "PUT", "http://backend/", strings.NewReader("payload"))
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				cancel()
			}
		}()
	}
	wg.Wait()
	if n := fb.unclosed(); n != 0 {
		t.Errorf("%d response bodies left unclosed", n)
	}
	for i, b := range fb.bodies {
		if string(b) != "payload" {
			t.Fatalf("attempt %d sent %q", i, b)
		}
	}
}
