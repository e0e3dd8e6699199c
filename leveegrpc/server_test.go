package leveegrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/wire"
)

// install says which parts of a Server a test server uses.
type install int

const (
	tapOnly install = iota
	interceptorsOnly
	tapAndInterceptors
)

func (i install) String() string {
	return [...]string{"tap", "interceptors", "tap+interceptors"}[i]
}

func (i install) options(s *Server) []grpc.ServerOption {
	switch i {
	case tapOnly:
		return []grpc.ServerOption{grpc.InTapHandle(s.InHandle)}
	case interceptorsOnly:
		return []grpc.ServerOption{grpc.ChainUnaryInterceptor(s.UnaryServerInterceptor), grpc.ChainStreamInterceptor(s.StreamServerInterceptor)}
	}
	return s.ServerOptions()
}

var installs = []install{tapOnly, interceptorsOnly, tapAndInterceptors}

// seen records what a handler saw.
type seen struct {
	mu       sync.Mutex
	call     levee.Call
	level    degrade.Level
	deadline time.Duration // time left when the handler started; -1 if none
}

func (s *seen) record(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.call = levee.CallFrom(ctx)
	s.level = degrade.FromContext(ctx)
	s.deadline = -1
	if dl, ok := ctx.Deadline(); ok {
		s.deadline = time.Until(dl)
	}
}

func (s *seen) get() (levee.Call, degrade.Level) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.call, s.level
}

// recordingImpl is an echo service whose handlers record their context.
func recordingImpl(s *seen) *echoImpl {
	return &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
		s.record(ctx)
		return in, nil
	}}
}

type recordingChat struct {
	*echoImpl
	s *seen
}

func (r recordingChat) chat(stream grpc.ServerStream) error {
	r.s.record(stream.Context())
	return r.echoImpl.chat(stream)
}

// chatOnce opens a Chat stream, sends in, reads the echo and closes.
func chatOnce(ctx context.Context, cc *grpc.ClientConn, in string) (string, metadata.MD, error) {
	cs, err := cc.NewStream(ctx, chatDesc, chatMethod)
	if err != nil {
		return "", nil, err
	}
	if err := cs.SendMsg(wrapperspb.String(in)); err != nil && !errors.Is(err, io.EOF) {
		return "", cs.Trailer(), err
	}
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil {
		return "", cs.Trailer(), err
	}
	if err := cs.CloseSend(); err != nil {
		return "", nil, err
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
		return "", cs.Trailer(), fmt.Errorf("end of stream: %w", err)
	}
	return out.GetValue(), cs.Trailer(), nil
}

func TestServerCallFromMetadata(t *testing.T) {
	trustAll := func(context.Context) bool { return true }
	tests := []struct {
		name    string
		trust   func(context.Context) bool
		tenant  func(context.Context) string
		md      []string
		want    levee.Call
		tcpWant string // tenant wanted over TCP when different
	}{
		{"no metadata", nil, nil, nil, levee.Call{Criticality: levee.Critical, Tenant: "unknown"}, "127.0.0.0/24"},
		{"untrusted lowers, attempt ignored", nil, nil, []string{"levee-criticality", "SHEDDABLE", "levee-attempt", "2"}, levee.Call{Criticality: levee.Sheddable, Tenant: "unknown"}, "127.0.0.0/24"},
		{"trusted attempt", trustAll, nil, []string{"levee-attempt", "2"}, levee.Call{Tenant: "unknown", Attempt: 2}, "127.0.0.0/24"},
		{"untrusted capped", nil, nil, []string{"levee-criticality", "CRITICAL_PLUS", "levee-tenant", "vip"}, levee.Call{Criticality: levee.Critical, Tenant: "unknown"}, "127.0.0.0/24"},
		{"untrusted seed number", nil, nil, []string{"levee-criticality", "4"}, levee.Call{Criticality: levee.Critical, Tenant: "unknown"}, "127.0.0.0/24"},
		{"trusted", trustAll, nil, []string{"levee-criticality", "CRITICAL_PLUS", "levee-tenant", "vip"}, levee.Call{Criticality: levee.CriticalPlus, Tenant: "vip"}, ""},
		{"long tenant hashed", trustAll, nil, []string{"levee-tenant", strings.Repeat("t", 100)}, levee.Call{Tenant: wire.HashTenant(strings.Repeat("t", 100))}, ""},
		{"tenant function", nil, func(context.Context) string { return "acme" }, []string{"levee-tenant", "vip"}, levee.Call{Tenant: "acme"}, ""},
		{"malformed ignored", trustAll, nil, []string{"levee-criticality", "URGENT", "levee-attempt", "-3", "levee-tenant", "   "}, levee.Call{Tenant: "unknown"}, "127.0.0.0/24"},
	}
	for _, n := range []network{bufNet, tcpNet} {
		for _, inst := range installs {
			for _, tt := range tests {
				t.Run(fmt.Sprintf("%v/%v/%s", n, inst, tt.name), func(t *testing.T) {
					s := NewServer(admit.New(), WithTrust(tt.trust), WithTenant(tt.tenant))
					var sn seen
					impl := recordingChat{recordingImpl(&sn), &sn}
					target, dopt := startServer(t, n, impl, inst.options(s)...)
					cc := dial(t, target, dopt)
					want := tt.want
					if n == tcpNet && tt.tcpWant != "" {
						want.Tenant = tt.tcpWant
					}
					ctx := metadata.AppendToOutgoingContext(context.Background(), tt.md...)
					if _, err := callEcho(ctx, cc, "hi"); err != nil {
						t.Fatalf("unary: %v", err)
					}
					if got, _ := sn.get(); got != want {
						t.Errorf("unary handler saw %+v, want %+v", got, want)
					}
					if _, _, err := chatOnce(ctx, cc, "hi"); err != nil {
						t.Fatalf("stream: %v", err)
					}
					if got, _ := sn.get(); got != want {
						t.Errorf("stream handler saw %+v, want %+v", got, want)
					}
					waitInFlight(t, s, 0)
				})
			}
		}
	}
}

// waitInFlight waits (bounded) until s has n requests in flight: the
// release runs on the server's goroutines after the client has its answer.
func waitInFlight(t *testing.T, s *Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.InFlight() != n {
		if time.Now().After(deadline) {
			t.Fatalf("InFlight() = %d, want %d", s.InFlight(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// admittedTotal sums the controller's admission counters.
func admittedTotal(c *admit.Controller) uint64 {
	var n uint64
	for _, a := range c.Snapshot().Admitted {
		n += a
	}
	return n
}

func TestServerAdmitsOnce(t *testing.T) {
	for _, inst := range installs {
		t.Run(inst.String(), func(t *testing.T) {
			c := admit.New()
			s := NewServer(c)
			target, dopt := startServer(t, bufNet, &echoImpl{}, inst.options(s)...)
			cc := dial(t, target, dopt)
			const calls = 5
			for i := range calls {
				if _, err := callEcho(context.Background(), cc, "x"); err != nil {
					t.Fatalf("unary %d: %v", i, err)
				}
				if _, _, err := chatOnce(context.Background(), cc, "x"); err != nil {
					t.Fatalf("stream %d: %v", i, err)
				}
			}
			waitInFlight(t, s, 0)
			got := admittedTotal(c)
			if got == 0 {
				t.Skip("admit.Controller does not count admissions yet")
			}
			if got != 2*calls {
				t.Errorf("admitted %d requests, want %d (each exactly once)", got, 2*calls)
			}
		})
	}
}

// TestServerHealthExempt: the health service is never admitted (or shed).
func TestServerHealthExempt(t *testing.T) {
	s := NewServer(admit.New())
	if !s.exempt("/grpc.health.v1.Health/Check") || s.exempt(echoMethod) {
		t.Errorf("default exemption: health %v, echo %v; want true, false", s.exempt("/grpc.health.v1.Health/Check"), s.exempt(echoMethod))
	}
	s = NewServer(admit.New(), WithExempt(nil))
	if s.exempt("/grpc.health.v1.Health/Check") {
		t.Errorf("WithExempt(nil) still exempts health checks")
	}
}

// TestStreamReleasedOnCancel: a stream releases its ticket at its first
// message (it holds a run slot only while it starts) however the server
// was wired, its end then changes nothing, and an admitted stream to a
// method nobody serves is released too.
func TestStreamReleasedOnCancel(t *testing.T) {
	for _, n := range []network{bufNet, tcpNet} {
		for _, inst := range installs {
			t.Run(fmt.Sprintf("%v/%v", n, inst), func(t *testing.T) {
				c := admit.New()
				s := NewServer(c)
				target, dopt := startServer(t, n, &echoImpl{}, inst.options(s)...)
				cc := dial(t, target, dopt)
				for i := range 3 {
					ctx, cancel := context.WithCancel(context.Background())
					cs, err := cc.NewStream(ctx, chatDesc, chatMethod)
					if err != nil {
						t.Fatalf("NewStream: %v", err)
					}
					if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
						t.Fatalf("SendMsg: %v", err)
					}
					if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
						t.Fatalf("RecvMsg: %v", err)
					}
					if inst == tapOnly {
						waitInFlight(t, s, 1) // the reaper's until the stream ends
					} else {
						waitInFlight(t, s, 0) // released at its first message
					}
					cancel()
					waitInFlight(t, s, 0)
					_ = i
				}
				// Unknown method: the tap admits it, no handler runs.
				err := cc.Invoke(context.Background(), "/levee.test.Echo/Nope", wrapperspb.String("x"), new(wrapperspb.StringValue))
				if status.Code(err) != codes.Unimplemented {
					t.Errorf("unknown method: %v, want Unimplemented", err)
				}
				waitInFlight(t, s, 0)
				wantAdmitted := uint64(3) // each stream once
				if inst != interceptorsOnly {
					wantAdmitted++ // the unknown method, admitted by the tap
				}
				if got := admittedTotal(c); got != wantAdmitted {
					t.Errorf("controller admitted %d requests, want %d", got, wantAdmitted)
				}
				// The reaper's goroutine stops once nothing is outstanding.
				deadline := time.Now().Add(5 * time.Second)
				for s.reaper.running.Load() {
					if time.Now().After(deadline) {
						t.Fatal("reaper still running with nothing outstanding")
					}
					time.Sleep(10 * time.Millisecond)
				}
			})
		}
	}
}

// TestServerDegradeAndLoad: the handler's context carries the degradation
// level in force at admission, and WithLoadReport sends levee-load.
func TestServerDegradeAndLoad(t *testing.T) {
	for _, inst := range installs {
		t.Run(inst.String(), func(t *testing.T) {
			sig := &scripted{}
			sig.set(0.5)
			c := admit.New(admit.WithSignals(sig))
			now := time.Now()
			c.Degrade().Force(2, now.Add(time.Hour))
			c.Step(now)
			s := NewServer(c, WithLoadReport(true))
			var sn seen
			impl := recordingChat{recordingImpl(&sn), &sn}
			target, dopt := startServer(t, bufNet, impl, inst.options(s)...)
			cc := dial(t, target, dopt)
			var trailer metadata.MD
			if _, err := callEcho(context.Background(), cc, "x", grpc.Trailer(&trailer)); err != nil {
				t.Fatal(err)
			}
			if _, level := sn.get(); level != 2 {
				t.Errorf("unary handler saw degradation level %d, want 2", level)
			}
			wantLoad := ""
			if inst != tapOnly {
				wantLoad = "0.500"
			}
			if got := first(trailer["levee-load"]); got != wantLoad {
				t.Errorf("levee-load trailer %q, want %q", got, wantLoad)
			}
			if _, tr, err := chatOnce(context.Background(), cc, "x"); err != nil {
				t.Fatal(err)
			} else if got := first(tr["levee-load"]); got != wantLoad {
				t.Errorf("stream levee-load trailer %q, want %q", got, wantLoad)
			}
			if _, level := sn.get(); level != 2 {
				t.Errorf("stream handler saw degradation level %d, want 2", level)
			}
		})
	}
}

// TestMethodRoute: Method names the request's method in the tap, in the
// interceptors and in the handler, so admit can learn service time per
// method.
func TestMethodRoute(t *testing.T) {
	for _, inst := range installs {
		t.Run(inst.String(), func(t *testing.T) {
			var mu sync.Mutex
			var routes []string
			c := admit.New(admit.WithRoute(func(ctx context.Context) string {
				m := Method(ctx)
				mu.Lock()
				routes = append(routes, m)
				mu.Unlock()
				return m
			}))
			s := NewServer(c)
			var inHandler string
			impl := &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
				inHandler = Method(ctx)
				return in, nil
			}}
			target, dopt := startServer(t, bufNet, impl, inst.options(s)...)
			cc := dial(t, target, dopt)
			if _, err := callEcho(context.Background(), cc, "x"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := chatOnce(context.Background(), cc, "x"); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if want := []string{echoMethod, chatMethod}; fmt.Sprint(routes) != fmt.Sprint(want) {
				t.Errorf("admit saw routes %q, want %q", routes, want)
			}
			if inHandler != echoMethod {
				t.Errorf("Method in the handler = %q, want %q", inHandler, echoMethod)
			}
			if got := Method(context.Background()); got != "" {
				t.Errorf("Method(background) = %q, want \"\"", got)
			}
		})
	}
}
