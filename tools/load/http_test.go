package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

func resp(code int, reject string) *http.Response {
	r := &http.Response{StatusCode: code, Header: http.Header{}}
	if reject != "" {
		r.Header.Set("Levee-Reject", reject)
	}
	return r
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want Outcome
		f    Failure
	}{
		{"200", resp(200, ""), nil, Goodput, OtherFailure},
		{"204", resp(204, ""), nil, Goodput, OtherFailure},
		{"503 levee", resp(503, "overloaded"), nil, Rejected, OtherFailure},
		{"429 levee", resp(429, "quota"), nil, Rejected, OtherFailure},
		{"504 levee", resp(504, "deadline"), nil, Rejected, OtherFailure},
		{"503 plain", resp(503, ""), nil, Failed, Status5xx},
		{"500 with header", resp(500, "overloaded"), nil, Failed, Status5xx},
		{"404", resp(404, ""), nil, Failed, Status4xx},
		{"302", resp(302, ""), nil, Failed, OtherFailure},
		{"throttled error", nil, fmt.Errorf("get: %w", levee.ErrThrottled), Throttled, OtherFailure},
		{"overloaded error", nil, fmt.Errorf("get: %w", levee.ErrOverloaded), Rejected, OtherFailure},
		{"deadline rejection", nil, levee.ErrDeadline, Rejected, OtherFailure},
		{"timeout", nil, context.DeadlineExceeded, Failed, Timeout},
		{"cancelled", nil, context.Canceled, Failed, Cancelled},
		{"reset", nil, syscall.ECONNRESET, Failed, Reset},
		{"eof", nil, fmt.Errorf("get: %w", io.EOF), Failed, Reset},
		{"refused", nil, fmt.Errorf("dial: %w", syscall.ECONNREFUSED), Failed, Refused},
		{"other", nil, errors.New("tls: bad certificate"), Failed, OtherFailure},
		{"no fd", nil, fmt.Errorf("dial: %w", syscall.EMFILE), GenError, OtherFailure},
		{"no port", nil, fmt.Errorf("dial: %w", syscall.EADDRNOTAVAIL), GenError, OtherFailure},
	}
	for _, tt := range tests {
		if o, f := Classify(tt.resp, tt.err); o != tt.want || f != tt.f {
			t.Errorf("%s: Classify = %v, %v; want %v, %v", tt.name, o, f, tt.want, tt.f)
		}
	}
}

// seen records what a test server received.
type seen struct {
	mu       sync.Mutex
	requests int
	headers  []http.Header
	bodies   []string
}

func (s *seen) handler(status int, reject string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.requests++
		s.headers = append(s.headers, r.Header.Clone())
		s.bodies = append(s.bodies, string(b))
		s.mu.Unlock()
		if reject != "" {
			w.Header().Set("Levee-Reject", reject)
		}
		w.WriteHeader(status)
	})
}

// TestClientModels sends 10 requests under each client model to a server
// answering status, and checks the attempts, the outcome and what the
// server saw.
func TestClientModels(t *testing.T) {
	tests := []struct {
		name           string
		client         string
		retries        int
		status         int
		reject         string
		wantAttempts   int64
		wantOutcome    func(PhaseStats) int64
		wantFailedBy   string
		wantRequests   int
		wantAttemptHdr string // of the last request
	}{
		{"none, 500", ClientNone, 0, 500, "", 10, func(p PhaseStats) int64 { return p.Failed }, "status_5xx", 10, "0"},
		{"naive 2 retries, 500", ClientNaive, 2, 500, "", 30, func(p PhaseStats) int64 { return p.Failed }, "status_5xx", 30, "2"},
		{"naive, 200", ClientNaive, 2, 200, "", 10, func(p PhaseStats) int64 { return p.Goodput }, "", 10, "0"},
		{"levee, 200", ClientLevee, 0, 200, "", 10, func(p PhaseStats) int64 { return p.Goodput }, "", 10, "0"},
		// levee's client throttles itself once the server rejects: every
		// request ends rejected by the server or throttled locally, and
		// only the first few reach the server.
		{"levee, 503 overloaded", ClientLevee, 0, 503, "overloaded; no-retry", -1, func(p PhaseStats) int64 { return p.Rejected + p.Throttled }, "", -1, "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s seen
			srv := httptest.NewServer(s.handler(tt.status, tt.reject))
			defer srv.Close()
			h, err := NewHTTP(HTTP{Method: http.MethodPost, URL: srv.URL + "/x", Body: []byte("payload"),
				Header: http.Header{"X-Test": {"1"}}, Client: tt.client, Retries: tt.retries, Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer h.CloseIdleConnections()
			rep, err := Run(context.Background(), Config{
				Phases: []Phase{{Name: "a", Rate: 100, Duration: 100 * time.Millisecond}},
				Do:     h.Func(),
				Mix:    Mix{Criticalities: []Share{{"SHEDDABLE", 1}}, Tenants: []Share{{"acme", 1}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			p := rep.Phases[0]
			s.mu.Lock()
			requests := s.requests
			s.mu.Unlock()
			if tt.wantAttempts < 0 {
				tt.wantAttempts, tt.wantRequests = int64(requests), requests
			}
			if p.Offered != 10 || p.Attempted != tt.wantAttempts || tt.wantOutcome(p) != 10 {
				t.Errorf("offered %d attempted %d tally %+v, want 10, %d, all 10 in the expected outcome", p.Offered, p.Attempted, p.Tally, tt.wantAttempts)
			}
			if tt.wantFailedBy != "" && p.FailedBy[tt.wantFailedBy] != 10 {
				t.Errorf("failed by %v, want 10 %s", p.FailedBy, tt.wantFailedBy)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.requests != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", s.requests, tt.wantRequests)
			}
			for i, hd := range s.headers {
				if hd.Get("Levee-Criticality") != "SHEDDABLE" || hd.Get("Levee-Tenant") != "acme" || hd.Get("X-Test") != "1" || s.bodies[i] != "payload" {
					t.Fatalf("request %d: criticality %q tenant %q x-test %q body %q", i, hd.Get("Levee-Criticality"), hd.Get("Levee-Tenant"), hd.Get("X-Test"), s.bodies[i])
				}
				if hd.Get(DeadlineHeader) != "" {
					t.Fatalf("request %d carries %s without SendDeadline", i, DeadlineHeader)
				}
			}
			var maxAttempt int
			for _, hd := range s.headers {
				a, _ := strconv.Atoi(hd.Get("Levee-Attempt"))
				maxAttempt = max(maxAttempt, a)
			}
			if strconv.Itoa(maxAttempt) != tt.wantAttemptHdr {
				t.Errorf("highest Levee-Attempt %d, want %s", maxAttempt, tt.wantAttemptHdr)
			}
		})
	}
}

func TestNewHTTPErrors(t *testing.T) {
	for _, h := range []HTTP{
		{URL: "http://127.0.0.1/", Client: "smart"},
		{URL: "http://127.0.0.1/", Client: ClientNaive, Retries: 11},
		{URL: "http://127.0.0.1/", Client: ClientNone, Method: "BAD METHOD"},
		{URL: "http://[::1/", Client: ClientNone},
	} {
		if _, err := NewHTTP(h); err == nil {
			t.Errorf("NewHTTP(%+v): err = nil", h)
		}
	}
}

// A request that outlives its deadline fails as a timeout, and the
// deadline header reaches the server when asked for.
func TestTimeoutAndDeadlineHeader(t *testing.T) {
	var got string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Header.Get(DeadlineHeader)
		mu.Unlock()
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}))
	defer srv.Close()
	h, err := NewHTTP(HTTP{URL: srv.URL, Client: ClientNone, Timeout: 50 * time.Millisecond, SendDeadline: true})
	if err != nil {
		t.Fatal(err)
	}
	c := &Call{}
	if o := h.Func()(context.Background(), c); o != Failed || c.Failure != Timeout {
		t.Errorf("outcome %v %v, want failed timeout", o, c.Failure)
	}
	mu.Lock()
	defer mu.Unlock()
	if _, err := strconv.ParseInt(got, 10, 64); err != nil {
		t.Errorf("%s = %q, want Unix nanoseconds", DeadlineHeader, got)
	}
}
