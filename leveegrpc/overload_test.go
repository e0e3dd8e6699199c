package leveegrpc

import (
	"context"
	"io"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/overload"
)

// TestServerOverloadGate: with the overload manager at its last level,
// unary calls and streams other than CRITICAL_PLUS end UNAVAILABLE
// before admission, counted by the controller; CRITICAL_PLUS calls and
// health checks are served; every call let through leaves the manager's
// in-flight count when it ends; at Normal everything is served. For each
// way a Server can be installed.
func TestServerOverloadGate(t *testing.T) {
	for _, inst := range installs {
		t.Run(inst.String(), func(t *testing.T) {
			var reading atomic.Uint64
			// A resource without a goal: no in-flight cap, the levels only.
			m := overload.New(overload.WithPeriod(10*time.Second), overload.WithCooldown(overload.CriticalOnly, 0),
				overload.WithResources(overload.Resource{Name: "memory", Enter: [3]float64{0.92, 0.95, 0.98},
					Read: func() overload.Reading { return overload.Reading{Value: math.Float64frombits(reading.Load())} }}))
			step := func(v float64) {
				reading.Store(math.Float64bits(v))
				m.Step(time.Now())
			}
			ctl := admit.New()
			s := NewServer(ctl, WithOverload(m), WithTrust(func(context.Context) bool { return true }))
			target, d := startServer(t, bufNet, &echoImpl{}, inst.options(s)...)
			cc := dial(t, target, d)
			ctx := context.Background()
			call := func(crit string) codes.Code {
				cctx := metadata.AppendToOutgoingContext(ctx, "levee-criticality", crit)
				_, err := callEcho(cctx, cc, "x")
				return status.Code(err)
			}
			stream := func(crit string) codes.Code {
				cctx := metadata.AppendToOutgoingContext(ctx, "levee-criticality", crit)
				st, err := cc.NewStream(cctx, chatDesc, chatMethod)
				if err != nil {
					return status.Code(err)
				}
				// io.EOF: the server ended the stream (a refusal may arrive
				// before the message is sent); its status is RecvMsg's.
				if err := st.SendMsg(wrapperspb.String("x")); err != nil && err != io.EOF {
					return status.Code(err)
				}
				_ = st.CloseSend()
				out := new(wrapperspb.StringValue)
				return status.Code(st.RecvMsg(out))
			}
			health := func() codes.Code {
				_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
				return status.Code(err)
			}
			step(0.99) // Critical: only CRITICAL_PLUS
			for _, c := range []struct {
				what      string
				got, want codes.Code
			}{
				{"unary CRITICAL", call("CRITICAL"), codes.Unavailable},
				{"unary SHEDDABLE", call("SHEDDABLE"), codes.Unavailable},
				{"unary CRITICAL_PLUS", call("CRITICAL_PLUS"), codes.OK},
				{"stream CRITICAL", stream("CRITICAL"), codes.Unavailable},
				{"stream CRITICAL_PLUS", stream("CRITICAL_PLUS"), codes.OK},
				{"health check", health(), codes.OK},
			} {
				if c.got != c.want {
					t.Errorf("critical: %s = %v, want %v", c.what, c.got, c.want)
				}
			}
			refused := ctl.Snapshot().Rejected
			if n := refused[levee.Critical][levee.Overloaded] + refused[levee.Sheddable][levee.Overloaded]; n != 3 {
				t.Errorf("controller counted %d overload rejections, want the gate's 3", n)
			}
			step(0.5)
			for _, c := range []string{"SHEDDABLE", "CRITICAL"} {
				if got := call(c); got != codes.OK {
					t.Errorf("normal: unary %s = %v, want OK", c, got)
				}
				if got := stream(c); got != codes.OK {
					t.Errorf("normal: stream %s = %v, want OK", c, got)
				}
			}
			// Released tickets (the reaper's, for tap-only streams) leave
			// the manager's count.
			for deadline := time.Now().Add(5 * time.Second); m.InFlight() != 0 || s.InFlight() != 0; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("in flight: manager %d, server %d; want 0 once every call ended", m.InFlight(), s.InFlight())
				}
			}
		})
	}
}

// TestProtectOverloadGate: Protect gives its Server the manager
// leveehttp.Protect builds.
func TestProtectOverloadGate(t *testing.T) {
	p, err := Protect(context.Background(), quietOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if o := p.HTTP().Overload(); o == nil || p.Server().gate != o.Manager() {
		t.Errorf("the Server's gate %p is not leveehttp.Protect's overload manager", p.Server().gate)
	}
}
