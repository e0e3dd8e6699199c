package leveegrpc

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/retry"
)

// This file drives the README's "On the wire" tables through both adapters
// with one table each: the request headers a server reads (leveehttp's
// Handler over HTTP/1, leveegrpc's Server over gRPC, both on loopback TCP)
// and the answers it sends when it rejects (and what levee's clients read
// from them).

// wirePeer is the default tenant of a loopback caller, and wireAddr its
// address, the call's Peer when the tenant is its network.
const wirePeer = "127.0.0.0/24"

var wireAddr = netip.MustParseAddr("127.0.0.1")

// Test-only request headers the servers' trust and tenant functions read.
const (
	hdrTrusted = "X-Test-Trusted"
	hdrUser    = "X-Test-User"
)

type wireRequest struct {
	name string
	// headers are name, value pairs, HTTP spelling; gRPC sends the same
	// names in lower case as metadata.
	headers []string
	// grpcTimeout is the caller's gRPC deadline, sent as grpc-timeout
	// (HTTP: a Grpc-Timeout header in gRPC's format); 0 for none.
	grpcTimeout time.Duration
	trusted     bool   // the server's trust function says yes
	user        string // the server's tenant function's answer
	want        levee.Call
	// budget is the time left the handler must see (0: no deadline).
	budget time.Duration
	// expired: answered 504 / DEADLINE_EXCEEDED, the handler never runs.
	expired bool
}

var long = strings.Repeat("k", 100)

// wireRequests is the request-header table of the README.
var wireRequests = []wireRequest{
	// Levee-Criticality
	{name: "criticality default", want: levee.Call{Criticality: levee.Critical, Tenant: wirePeer, Peer: wireAddr}},
	{name: "criticality lowered", headers: []string{"Levee-Criticality", "SHEDDABLE_PLUS"},
		want: levee.Call{Criticality: levee.SheddablePlus, Tenant: wirePeer, Peer: wireAddr}},
	{name: "criticality number", headers: []string{"Levee-Criticality", "1"},
		want: levee.Call{Criticality: levee.Sheddable, Tenant: wirePeer, Peer: wireAddr}},
	{name: "criticality untrusted raise capped", headers: []string{"Levee-Criticality", "CRITICAL_PLUS"},
		want: levee.Call{Criticality: levee.Critical, Tenant: wirePeer, Peer: wireAddr}},
	{name: "criticality untrusted 4 capped", headers: []string{"Levee-Criticality", "4"},
		want: levee.Call{Criticality: levee.Critical, Tenant: wirePeer, Peer: wireAddr}},
	{name: "criticality trusted raise", trusted: true, headers: []string{"Levee-Criticality", "CRITICAL_PLUS"},
		want: levee.Call{Criticality: levee.CriticalPlus, Tenant: wirePeer, Peer: wireAddr}},
	{name: "criticality malformed", headers: []string{"Levee-Criticality", "URGENT"},
		want: levee.Call{Criticality: levee.Critical, Tenant: wirePeer, Peer: wireAddr}},
	// Levee-Tenant
	{name: "tenant untrusted ignored", headers: []string{"Levee-Tenant", "victim"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}},
	{name: "tenant trusted", trusted: true, headers: []string{"Levee-Tenant", "acme"},
		want: levee.Call{Tenant: "acme"}},
	{name: "tenant trusted long hashed", trusted: true, headers: []string{"Levee-Tenant", long},
		want: levee.Call{Tenant: wire.HashTenant(long)}},
	{name: "tenant function", user: "alice", headers: []string{"Levee-Tenant", "victim"},
		want: levee.Call{Tenant: "alice"}},
	{name: "tenant function long hashed", user: long,
		want: levee.Call{Tenant: wire.HashTenant(long)}},
	{name: "tenant trusted header beats function", trusted: true, user: "alice", headers: []string{"Levee-Tenant", "svc"},
		want: levee.Call{Tenant: "svc"}},
	// Levee-Timeout-Ms, grpc-timeout, X-Envoy-Expected-Rq-Timeout-Ms
	{name: "timeout levee", headers: []string{"Levee-Timeout-Ms", "6000"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}, budget: 6 * time.Second},
	{name: "timeout envoy", headers: []string{"X-Envoy-Expected-Rq-Timeout-Ms", "6000"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}, budget: 6 * time.Second},
	{name: "timeout grpc", grpcTimeout: 6 * time.Second,
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}, budget: 6 * time.Second},
	{name: "timeout minimum wins", grpcTimeout: 20 * time.Second,
		headers: []string{"Levee-Timeout-Ms", "30000", "X-Envoy-Expected-Rq-Timeout-Ms", "6000"},
		want:    levee.Call{Tenant: wirePeer, Peer: wireAddr}, budget: 6 * time.Second},
	{name: "timeout grpc minimum", grpcTimeout: 6 * time.Second,
		headers: []string{"Levee-Timeout-Ms", "30000", "X-Envoy-Expected-Rq-Timeout-Ms", "20000"},
		want:    levee.Call{Tenant: wirePeer, Peer: wireAddr}, budget: 6 * time.Second},
	{name: "timeout malformed ignored", headers: []string{"Levee-Timeout-Ms", "1.5", "X-Envoy-Expected-Rq-Timeout-Ms", "soon"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}},
	{name: "timeout malformed beside valid", headers: []string{"Levee-Timeout-Ms", "NaN, 6000"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}, budget: 6 * time.Second},
	{name: "timeout clamped to 24h", headers: []string{"Levee-Timeout-Ms", "99999999999999"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}, budget: 24 * time.Hour},
	{name: "timeout zero expired", headers: []string{"Levee-Timeout-Ms", "0"}, expired: true},
	{name: "timeout negative expired", headers: []string{"X-Envoy-Expected-Rq-Timeout-Ms", "-5"}, expired: true},
	{name: "timeout one expired among valid", headers: []string{"Levee-Timeout-Ms", "6000", "X-Envoy-Expected-Rq-Timeout-Ms", "0"}, expired: true},
	// Levee-Attempt
	{name: "attempt", trusted: true, headers: []string{"Levee-Attempt", "2"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr, Attempt: 2}},
	{name: "attempt untrusted ignored", headers: []string{"Levee-Attempt", "2"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}},
	{name: "attempt malformed", trusted: true, headers: []string{"Levee-Attempt", "-1"},
		want: levee.Call{Tenant: wirePeer, Peer: wireAddr}},
}

// seenCall is what a handler saw: its call and the time left.
type seenCall struct {
	mu   sync.Mutex
	ran  bool
	call levee.Call
	left time.Duration // -1: no deadline
}

func (s *seenCall) record(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran, s.call, s.left = true, levee.CallFrom(ctx), -1
	if dl, ok := ctx.Deadline(); ok {
		s.left = time.Until(dl)
	}
}

func (s *seenCall) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran, s.call, s.left = false, levee.Call{}, 0
}

func (s *seenCall) get() seenCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return seenCall{ran: s.ran, call: s.call, left: s.left}
}

// wireServers runs one HTTP and one gRPC server whose handlers record
// what they saw, with trust and tenant functions reading the test headers.
type wireServers struct {
	seen    seenCall
	httpURL string
	cc      *grpc.ClientConn
}

func startWireServers(t *testing.T) *wireServers {
	ws := &wireServers{}
	hs := httptest.NewServer(leveehttp.NewHandler(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ws.seen.record(r.Context()) }),
		admit.New(),
		leveehttp.WithTrust(func(r *http.Request) bool { return r.Header.Get(hdrTrusted) != "" }),
		leveehttp.WithTenant(func(r *http.Request) string { return r.Header.Get(hdrUser) })))
	t.Cleanup(hs.Close)
	ws.httpURL = hs.URL

	first := func(ctx context.Context, k string) string {
		if v := metadata.ValueFromIncomingContext(ctx, k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	s := NewServer(admit.New(),
		WithTrust(func(ctx context.Context) bool { return first(ctx, strings.ToLower(hdrTrusted)) != "" }),
		WithTenant(func(ctx context.Context) string { return first(ctx, strings.ToLower(hdrUser)) }))
	impl := &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
		ws.seen.record(ctx)
		return in, nil
	}}
	target, dopt := startServer(t, tcpNet, impl, s.ServerOptions()...)
	ws.cc = dial(t, target, dopt)
	return ws
}

// send sends r over proto ("http" or "grpc") with a plain client and
// returns whether it was rejected as expired.
func (ws *wireServers) send(t *testing.T, proto string, r wireRequest) (expired bool) {
	t.Helper()
	pairs := append([]string(nil), r.headers...)
	if r.trusted {
		pairs = append(pairs, hdrTrusted, "1")
	}
	if r.user != "" {
		pairs = append(pairs, hdrUser, r.user)
	}
	if proto == "http" {
		req, err := http.NewRequest("GET", ws.httpURL+"/work", nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			req.Header.Add(pairs[i], pairs[i+1])
		}
		if r.grpcTimeout > 0 {
			req.Header.Set("Grpc-Timeout", wire.FormatGRPCTimeout(r.grpcTimeout))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("http: %v", err)
		}
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return false
		case http.StatusGatewayTimeout:
			if got := resp.Header.Get("Levee-Reject"); got != "deadline; no-retry" {
				t.Errorf("http: 504 with Levee-Reject %q, want deadline; no-retry", got)
			}
			return true
		}
		t.Fatalf("http: status %d", resp.StatusCode)
	}
	ctx := context.Background()
	for i := 0; i+1 < len(pairs); i += 2 {
		ctx = metadata.AppendToOutgoingContext(ctx, strings.ToLower(pairs[i]), pairs[i+1])
	}
	if r.grpcTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.grpcTimeout)
		defer cancel()
	}
	_, err := callEcho(ctx, ws.cc, "x")
	switch status.Code(err) {
	case codes.OK:
		return false
	case codes.DeadlineExceeded:
		if rej := Rejection(err, nil); rej == nil || rej.Reason != levee.Deadline || !rej.NoRetry {
			t.Errorf("grpc: DEADLINE_EXCEEDED reads %s, want deadline; no-retry", fmtRej(rej))
		}
		return true
	}
	t.Fatalf("grpc: %v", err)
	return false
}

// TestWireRequests: both adapters derive the same call and deadline from
// every row of the README's request-header table.
func TestWireRequests(t *testing.T) {
	ws := startWireServers(t)
	// The time left is read when the handler starts: allow for the trip.
	const slack = 1500 * time.Millisecond
	for _, proto := range []string{"http", "grpc"} {
		for _, r := range wireRequests {
			t.Run(proto+"/"+r.name, func(t *testing.T) {
				ws.seen.reset()
				expired := ws.send(t, proto, r)
				got := ws.seen.get()
				if expired != r.expired || got.ran == r.expired {
					t.Fatalf("expired %v, handler ran %v; want expired %v", expired, got.ran, r.expired)
				}
				if r.expired {
					return
				}
				if got.call != r.want {
					t.Errorf("call %+v, want %+v", got.call, r.want)
				}
				switch {
				case r.budget == 0 && got.left != -1:
					t.Errorf("deadline in %v, want none", got.left)
				case r.budget != 0 && (got.left > r.budget || got.left < r.budget-slack):
					t.Errorf("time left %v, want %v (minus at most %v)", got.left, r.budget, slack)
				}
			})
		}
	}
}

// wireResponse is a row of the README's response table.
type wireResponse struct {
	name string
	// scenario names the controller state (see scenarios in
	// reject_test.go); "" is an idle controller and an expired budget.
	scenario string
	status   int
	code     codes.Code
}

var wireResponses = []wireResponse{
	{"overloaded", "overloaded", http.StatusServiceUnavailable, codes.Unavailable},
	{"overloaded, don't retry", "overloaded no-retry", http.StatusServiceUnavailable, codes.Unavailable},
	{"tenant over quota", "quota", http.StatusTooManyRequests, codes.ResourceExhausted},
	{"deadline cannot be met", "", http.StatusGatewayTimeout, codes.DeadlineExceeded},
}

func findScenario(t *testing.T, name string) scenario {
	for _, sc := range scenarios {
		if sc.name == name {
			return sc
		}
	}
	if name == "" {
		return scenario{
			name: "deadline",
			setup: func(*testing.T) (*admit.Controller, []string, bool) {
				return admit.New(), []string{"levee-timeout-ms", "0"}, false
			},
			want: func(*admit.Controller, string) *levee.RejectedError { return rej(levee.Deadline, 0, true) },
		}
	}
	t.Fatalf("no scenario %q", name)
	return scenario{}
}

// TestWireResponses: for every row of the README's response table, a real
// controller in that state makes both adapters answer with the table's
// status, headers and pushback, and levee's clients read the same
// rejection from either.
func TestWireResponses(t *testing.T) {
	for _, row := range wireResponses {
		sc := findScenario(t, row.scenario)
		t.Run("http/"+row.name, func(t *testing.T) { wireHTTPResponse(t, row, sc) })
		for _, inst := range []install{tapAndInterceptors, interceptorsOnly} {
			t.Run(fmt.Sprintf("grpc/%v/%s", inst, row.name), func(t *testing.T) { wireGRPCResponse(t, row, sc, inst) })
		}
	}
}

func nearRej(got, want *levee.RejectedError, tol time.Duration) bool {
	if got == nil || want == nil {
		return got == want
	}
	g := *got
	if d := g.RetryAfter - want.RetryAfter; d <= tol && d >= -tol {
		g.RetryAfter = want.RetryAfter
	}
	return sameRej(&g, want)
}

func wireHTTPResponse(t *testing.T, row wireResponse, sc scenario) {
	c, md, warm := sc.setup(t)
	hs := httptest.NewServer(leveehttp.NewHandler(http.NotFoundHandler(), c,
		leveehttp.WithRand(halfRand),
		leveehttp.WithTrust(func(*http.Request) bool { return true })))
	defer hs.Close()
	newReq := func() *http.Request {
		req, _ := http.NewRequest("GET", hs.URL+"/work", nil)
		for i := 0; i+1 < len(md); i += 2 {
			req.Header.Add(textproto.CanonicalMIMEHeaderKey(md[i]), md[i+1])
		}
		return req
	}
	if warm {
		resp, err := http.DefaultClient.Do(newReq())
		if err != nil || resp.StatusCode != http.StatusNotFound {
			t.Fatalf("first request: %v %v, want 404 from the application", resp, err)
		}
		resp.Body.Close()
	}
	resp, err := http.DefaultClient.Do(newReq())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := sc.want(c, wirePeer)
	if resp.StatusCode != row.status {
		t.Fatalf("status %d, want %d", resp.StatusCode, row.status)
	}
	if got, w := resp.Header.Get("Levee-Reject"), wire.FormatReject(want.Reason, want.NoRetry); got != w {
		t.Errorf("Levee-Reject %q, want %q", got, w)
	}
	if want.Reason != levee.Deadline {
		// Retry-After in whole seconds ≥ 1, Levee-Retry-After-Ms exact.
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || ra < 1 {
			t.Errorf("Retry-After %q, want whole seconds ≥ 1", resp.Header.Get("Retry-After"))
		}
		if want.RetryAfter > 0 {
			ms, _, ok := wire.ParseRetryAfterMs(resp.Header.Values("Levee-Retry-After-Ms"))
			if d := ms - want.RetryAfter; !ok || d > sc.tol+time.Millisecond || d < -sc.tol-time.Millisecond {
				t.Errorf("Levee-Retry-After-Ms %v, want %v", ms, want.RetryAfter)
			}
			if secs := (want.RetryAfter + time.Second - 1) / time.Second; time.Duration(ra)*time.Second < secs*time.Second-sc.tol {
				t.Errorf("Retry-After %ds, want %v rounded up", ra, want.RetryAfter)
			}
		}
	}
	// levee's client reads it; having given up, it says no-retry upward
	// for an overload.
	ctx, cancel := clientContext(md)
	defer cancel()
	tr := leveehttp.NewTransport(nil, leveehttp.WithThrottle(nil), leveehttp.WithPolicy(retry.Policy{MaxAttempts: 1}),
		leveehttp.WithHosts(hs.Listener.Addr().String()))
	req, _ := http.NewRequestWithContext(ctx, "GET", hs.URL+"/work", nil)
	_, err = tr.RoundTrip(req)
	if got := levee.AsRejected(err); !nearRej(got, clientView(want), sc.tol+time.Millisecond) {
		t.Errorf("leveehttp.Transport reads %s, want %s", fmtRej(got), fmtRej(clientView(want)))
	}
}

// clientContext returns the context a levee client sends the request of
// the scenario metadata md with: its levee.Call, and an expired deadline
// for a spent budget (which the client refuses locally with the same
// rejection the server would send).
func clientContext(md []string) (context.Context, context.CancelFunc) {
	var call levee.Call
	var expired bool
	for i := 0; i+1 < len(md); i += 2 {
		switch md[i] {
		case wire.MdCriticality:
			call.Criticality, _ = wire.ParseCriticality(md[i+1 : i+2])
		case wire.MdTenant:
			call.Tenant = md[i+1]
		case wire.MdTimeoutMs:
			expired = true
		}
	}
	ctx := levee.WithCall(context.Background(), call)
	if expired {
		return context.WithDeadline(ctx, time.Now().Add(-time.Second))
	}
	return ctx, func() {}
}

// clientView is what a levee client that gave up returns for the server's
// rejection want: an overload becomes "overloaded; no-retry" (only this
// layer retries) without a delay; the server's own answer stays inside the
// *retry.GiveUpError.
func clientView(want *levee.RejectedError) *levee.RejectedError {
	if want.Reason != levee.Overloaded {
		return want
	}
	return rej(levee.Overloaded, 0, true)
}

func wireGRPCResponse(t *testing.T, row wireResponse, sc scenario, inst install) {
	c, md, warm := sc.setup(t)
	s := NewServer(c, WithRand(halfRand), WithTrust(func(context.Context) bool { return true }))
	target, dopt := startServer(t, tcpNet, &echoImpl{}, inst.options(s)...)
	cc := dial(t, target, dopt)
	ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
	if warm {
		if _, err := callEcho(ctx, cc, "x"); err != nil {
			t.Fatalf("first request: %v", err)
		}
	}
	var trailer metadata.MD
	_, err := callEcho(ctx, cc, "x", grpc.Trailer(&trailer))
	want := sc.want(c, wirePeer)
	if got := status.Code(err); got != row.code {
		t.Fatalf("code %v (%v), want %v", got, err, row.code)
	}
	if got := Rejection(err, trailer); !nearRej(got, want, sc.tol+time.Millisecond) {
		t.Errorf("status and trailer read %s, want %s", fmtRej(got), fmtRej(want))
	}
	pb, hasPB := trailer[wire.MdRetryPushbackMs]
	switch {
	case inst != interceptorsOnly || want.Reason == levee.Deadline:
		// A tap cannot send trailers; a deadline carries no pushback.
		if hasPB {
			t.Errorf("pushback %q, want none", pb)
		}
	case want.NoRetry:
		if len(pb) != 1 || pb[0] != "-1" {
			t.Errorf("pushback %q, want -1", pb)
		}
	default:
		d, _, ok := wire.ParseRetryAfterMs(pb)
		if diff := d - want.RetryAfter; !ok || diff > sc.tol+time.Millisecond || diff < -sc.tol-time.Millisecond {
			t.Errorf("pushback %q, want %v", pb, want.RetryAfter)
		}
	}
	lc := NewClient(WithThrottle(nil), WithPolicy(retry.Policy{MaxAttempts: 1}))
	lcc := dial(t, target, append(lc.DialOptions(), dopt)...)
	cctx, cancel := clientContext(md)
	defer cancel()
	_, err = callEcho(cctx, lcc, "x")
	if got := levee.AsRejected(err); !nearRej(got, clientView(want), sc.tol+time.Millisecond) {
		t.Errorf("leveegrpc.Client reads %s, want %s", fmtRej(got), fmtRej(clientView(want)))
	}
}
