package leveegrpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
)

func ceilMs(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// halfRand makes the Server's ±25% jitter factor exactly 1.
func halfRand() uint64 { return 1 << 63 }

// scenario drives a real admit.Controller with a scripted signal into one
// kind of rejection and says what a request (with md) must then get.
type scenario struct {
	name string
	// setup returns the controller, the metadata of the rejected request,
	// and a function that sends one request that must pass first (nil if
	// none).
	setup func(t *testing.T) (c *admit.Controller, md []string, warm bool)
	code  codes.Code
	// tol is how far the delay read may be from want's: a quota's wait
	// shrinks while the test runs.
	tol time.Duration
	// want returns the rejection admit gives, as the client must read it.
	want func(c *admit.Controller, tenant string) *levee.RejectedError
}

// testTenants are the tenants the test server derives for its callers.
var testTenants = []string{"unknown", "127.0.0.0/24"}

// stepUntil steps c with virtual time (from now), offering SHEDDABLE
// demand, until SHEDDABLE requests of every test tenant are rejected
// (20 probes each in a row).
func stepUntil(t *testing.T, c *admit.Controller, before func(), tenants ...string) {
	t.Helper()
	if len(tenants) == 0 {
		tenants = testTenants
	}
	now := time.Now()
	for range 400 {
		for j := range 30 {
			tk, err := c.AdmitAt(sheddable(tenants[j%len(tenants)]), now)
			if err == nil {
				tk.DoneAt(now, nil)
			}
		}
		if before != nil {
			before()
		}
		now = now.Add(50 * time.Millisecond)
		c.Step(now)
		if allRejected(c, now, tenants) {
			return
		}
	}
	t.Fatalf("controller never shed SHEDDABLE entirely: %+v", c.Snapshot())
}

func allRejected(c *admit.Controller, now time.Time, tenants []string) bool {
	for _, tenant := range tenants {
		for range 20 {
			if tk, err := c.AdmitAt(sheddable(tenant), now); err == nil {
				tk.DoneAt(now, nil)
				return false
			}
		}
	}
	return true
}

func sheddable(tenant string) context.Context {
	return levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable, Tenant: tenant})
}

var scenarios = []scenario{
	{
		name: "overloaded",
		setup: func(t *testing.T) (*admit.Controller, []string, bool) {
			sig := &scripted{}
			sig.set(10)
			c := admit.New(admit.WithSignals(sig), admit.WithSeed(1))
			stepUntil(t, c, nil)
			return c, []string{"levee-criticality", "SHEDDABLE"}, false
		},
		code: codes.Unavailable,
		want: func(c *admit.Controller, tenant string) *levee.RejectedError {
			_, err := c.Admit(sheddable(tenant))
			r := *levee.AsRejected(err)
			r.RetryAfter = ceilMs(r.RetryAfter)
			return &r
		},
	},
	{
		name: "overloaded no-retry",
		setup: func(t *testing.T) (*admit.Controller, []string, bool) {
			sig := &scripted{}
			sig.set(10)
			c := admit.New(admit.WithSignals(sig), admit.WithSeed(1))
			retries := levee.WithCall(context.Background(), levee.Call{Criticality: levee.CriticalPlus, Attempt: 2})
			stepUntil(t, c, func() {
				for range 50 {
					tk, _ := c.Admit(retries)
					tk.Done(nil)
				}
			})
			if !c.Snapshot().NoRetry {
				t.Fatalf("retry share %.2f did not turn on no-retry", c.Snapshot().RetryShare)
			}
			return c, []string{"levee-criticality", "SHEDDABLE"}, false
		},
		code: codes.Unavailable,
		want: func(*admit.Controller, string) *levee.RejectedError { return rej(levee.Overloaded, 0, true) },
	},
	{
		name: "quota",
		setup: func(t *testing.T) (*admit.Controller, []string, bool) {
			c := admit.New(admit.WithQuota("q", admit.Quota{Rate: 0.01, Burst: 1}))
			return c, []string{"levee-tenant", "q"}, true
		},
		code: codes.ResourceExhausted,
		tol:  time.Second,
		want: func(c *admit.Controller, _ string) *levee.RejectedError {
			_, err := c.Admit(levee.WithCall(context.Background(), levee.Call{Tenant: "q"}))
			r := *levee.AsRejected(err)
			r.RetryAfter = ceilMs(r.RetryAfter)
			return &r
		},
	},
}

// TestServerRejections: every rejection path (tap, unary interceptor,
// stream interceptor) reaches a plain gRPC client with the exact code and
// delay / no-retry, in the trailer (interceptors) and in the status details
// (always); no handler runs and no ticket is left behind.
func TestServerRejections(t *testing.T) {
	for _, n := range []network{bufNet, tcpNet} {
		for _, inst := range installs {
			for _, sc := range scenarios {
				for _, kind := range []string{"unary", "stream"} {
					t.Run(fmt.Sprintf("%v/%v/%s/%s", n, inst, sc.name, kind), func(t *testing.T) {
						c, md, warm := sc.setup(t)
						s := NewServer(c, WithRand(halfRand), WithTrust(func(context.Context) bool { return true }))
						impl := &echoImpl{}
						target, dopt := startServer(t, n, impl, inst.options(s)...)
						cc := dial(t, target, dopt)
						ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
						if warm {
							if _, err := callEcho(ctx, cc, "x"); err != nil {
								t.Fatalf("first request: %v", err)
							}
							impl.calls.Store(0)
						}
						var (
							err     error
							trailer metadata.MD
						)
						if kind == "unary" {
							_, err = callEcho(ctx, cc, "x", grpc.Trailer(&trailer))
						} else {
							err, trailer = rejectedStream(ctx, cc)
						}
						if got := status.Code(err); got != sc.code {
							t.Fatalf("code = %v (%v), want %v", got, err, sc.code)
						}
						want := sc.want(c, testTenants[n])
						near := func(got *levee.RejectedError) bool {
							if got == nil {
								return false
							}
							g := *got
							if d := g.RetryAfter - want.RetryAfter; d <= sc.tol && d >= -sc.tol {
								g.RetryAfter = want.RetryAfter
							}
							return sameRej(&g, want)
						}
						if got := Rejection(err, nil); !near(got) {
							t.Errorf("status details read %s, want %s", fmtRej(got), fmtRej(want))
						}
						if got := Rejection(err, trailer); !near(got) {
							t.Errorf("status and trailer read %s, want %s", fmtRej(got), fmtRej(want))
						}
						_, hasPB := trailer["grpc-retry-pushback-ms"]
						if inst == interceptorsOnly {
							pbRej := Rejection(status.Error(sc.code, ""), trailer)
							if want.NoRetry || want.RetryAfter > 0 {
								if !near(pbRej) {
									t.Errorf("pushback trailer %q reads %s, want %s", trailer["grpc-retry-pushback-ms"], fmtRej(pbRej), fmtRej(want))
								}
							}
						} else if hasPB {
							// The tap rejects first and cannot send trailers.
							t.Errorf("pushback trailer %q after a tap rejection, want none", trailer["grpc-retry-pushback-ms"])
						}
						if got := impl.calls.Load(); got != 0 {
							t.Errorf("handler ran %d times for a rejected request", got)
						}
						waitInFlight(t, s, 0)
					})
				}
			}
		}
	}
}

// rejectedStream opens a Chat stream expected to be rejected and returns
// the error and trailer it ends with.
func rejectedStream(ctx context.Context, cc *grpc.ClientConn) (error, metadata.MD) {
	cs, err := cc.NewStream(ctx, chatDesc, chatMethod)
	if err != nil {
		return err, nil
	}
	if err := cs.SendMsg(wrapperspb.String("x")); err != nil && !errors.Is(err, io.EOF) {
		return err, cs.Trailer()
	}
	err = cs.RecvMsg(new(wrapperspb.StringValue))
	if err == nil {
		err = errors.New("stream was not rejected")
	}
	return err, cs.Trailer()
}

// TestClientReadsRejections: levee's client interceptors turn each
// rejection path into an error carrying the *levee.RejectedError, for
// unary calls and for streams (whose rejection arrives on RecvMsg).
func TestClientReadsRejections(t *testing.T) {
	for _, inst := range installs {
		for _, sc := range scenarios[:2] {
			t.Run(fmt.Sprintf("%v/%s", inst, sc.name), func(t *testing.T) {
				c, md, _ := sc.setup(t)
				s := NewServer(c, WithRand(halfRand))
				target, dopt := startServer(t, bufNet, &echoImpl{}, inst.options(s)...)
				cl := testClient(&waits{}, retry.Policy{MaxAttempts: 1})
				cc := dial(t, target, append(cl.DialOptions(), dopt)...)
				ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
				want := sc.want(c, "unknown")
				_, uerr := callEcho(ctx, cc, "x")
				serr, _ := rejectedStream(ctx, cc)
				// A unary call levee's client gave up on says "no-retry"
				// first and keeps the server's rejection inside; a stream,
				// never retried by levee, gives the server's rejection.
				var gu *retry.GiveUpError
				if want.NoRetry {
					gu = &retry.GiveUpError{Err: uerr}
				} else if !errors.As(uerr, &gu) {
					t.Fatalf("unary: %v is not a *retry.GiveUpError", uerr)
				}
				for _, c := range []struct {
					kind string
					err  error
					want *levee.RejectedError
				}{
					{"unary", uerr, rej(levee.Overloaded, 0, true)},
					{"unary inner", gu.Err, want},
					{"stream", serr, want},
				} {
					if status.Code(c.err) != sc.code {
						t.Errorf("%s: code %v (%v), want %v", c.kind, status.Code(c.err), c.err, sc.code)
					}
					if got := levee.AsRejected(c.err); !sameRej(got, c.want) {
						t.Errorf("%s: levee.AsRejected = %s, want %s", c.kind, fmtRej(got), fmtRej(c.want))
					}
				}
				waitInFlight(t, s, 0)
			})
		}
	}
}

// TestHealthNeverShed: health checks pass while everything else is shed.
func TestHealthNeverShed(t *testing.T) {
	for _, inst := range installs {
		t.Run(inst.String(), func(t *testing.T) {
			c, md, _ := scenarios[1].setup(t) // overloaded, no-retry
			s := NewServer(c)
			target, dopt := startServer(t, bufNet, &echoImpl{}, inst.options(s)...)
			cc := dial(t, target, dopt)
			ctx := metadata.AppendToOutgoingContext(context.Background(), md...)
			if _, err := callEcho(ctx, cc, "x"); status.Code(err) != codes.Unavailable {
				t.Fatalf("echo: %v, want Unavailable", err)
			}
			resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health check: %v, %v; want SERVING", resp.GetStatus(), err)
			}
		})
	}
}
