package leveegrpc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
)

// switchable is a server interceptor placed before levee's on the bottom
// tier: while rej is set it answers every call with it, as an overloaded
// levee server does.
type switchable struct {
	rej   atomic.Pointer[levee.RejectedError]
	calls atomic.Int64
}

func (s *switchable) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	s.calls.Add(1)
	if r := s.rej.Load(); r != nil {
		if md := Pushback(r); md != nil {
			_ = grpc.SetTrailer(ctx, md)
		}
		return nil, Status(r).Err()
	}
	return handler(ctx, req)
}

// TestChain runs top → mid → bottom, each hop with levee's client and
// server: criticality, tenant and deadline reach the bottom; the bottom's
// overload reaches the top as "no-retry" after the mid-tier's retries and
// is not retried again; quota passes through with its delay; a deadline
// arrives as DEADLINE_EXCEEDED.
func TestChain(t *testing.T) {
	trustAll := WithTrust(func(context.Context) bool { return true })
	const margin = 20 * time.Millisecond
	for _, n := range []network{bufNet, tcpNet} {
		t.Run(n.String(), func(t *testing.T) {
			// Bottom: records what it sees; overload switched on later.
			var bottomSeen seen
			sw := &switchable{}
			bottomImpl := &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
				bottomSeen.record(ctx)
				if in == "stage" {
					return "", levee.CheckStage(ctx, time.Hour)
				}
				return in, nil
			}}
			bottomSig := &scripted{}
			bottomSig.set(0.1)
			bottomCtl := admit.New(admit.WithSignals(bottomSig), admit.WithSeed(1))
			bottom := NewServer(bottomCtl, trustAll)
			bottomTarget, bottomDial := startServer(t, n, bottomImpl,
				append([]grpc.ServerOption{grpc.ChainUnaryInterceptor(sw.unary)}, bottom.ServerOptions()...)...)

			// Mid: forwards to the bottom through levee's client.
			var midWaits waits
			midClient := testClient(&midWaits, retry.Policy{}, WithMargin(margin))
			toBottom := dial(t, bottomTarget, append(midClient.DialOptions(), bottomDial)...)
			var midSeen seen
			var midCalls atomic.Int64
			midImpl := &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
				midCalls.Add(1)
				midSeen.record(ctx)
				return callEcho(ctx, toBottom, in)
			}}
			mid := NewServer(nil, trustAll, WithRand(func() uint64 { return 1 << 63 })) // jitter factor exactly 1
			midTarget, midDial := startServer(t, n, midImpl, mid.ServerOptions()...)

			// Top: a levee client with retries enabled.
			var topWaits waits
			topClient := testClient(&topWaits, retry.Policy{}, WithMargin(margin))
			toMid := dial(t, midTarget, append(topClient.DialOptions(), midDial)...)

			const budget = time.Minute
			want := levee.Call{Criticality: levee.SheddablePlus, Tenant: "acme"}
			ctx, cancel := context.WithTimeout(levee.WithCall(context.Background(), want), budget)
			defer cancel()

			// Healthy: propagation.
			if _, err := callEcho(ctx, toMid, "x"); err != nil {
				t.Fatalf("healthy call: %v", err)
			}
			for _, hop := range []struct {
				name string
				s    *seen
				max  time.Duration
			}{{"mid", &midSeen, budget - margin}, {"bottom", &bottomSeen, budget - 2*margin}} {
				hop.s.mu.Lock()
				if hop.s.call != want {
					t.Errorf("%s saw %+v, want %+v", hop.name, hop.s.call, want)
				}
				if hop.s.deadline <= 0 || hop.s.deadline > hop.max {
					t.Errorf("%s's time left %v, want in (0, %v]", hop.name, hop.s.deadline, hop.max)
				}
				hop.s.mu.Unlock()
			}

			// Bottom overloaded, retryable: the mid-tier retries (3
			// attempts), then answers "no-retry"; the top does not retry.
			sw.rej.Store(rej(levee.Overloaded, 10*time.Millisecond, false))
			midCalls.Store(0)
			sw.calls.Store(0)
			_, err := callEcho(ctx, toMid, "x")
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("overloaded chain: %v, want Unavailable", err)
			}
			if r := levee.AsRejected(err); r == nil || r.Reason != levee.Overloaded || !r.NoRetry {
				t.Errorf("top reads %s, want overloaded no-retry", fmtRej(r))
			}
			if got := midCalls.Load(); got != 1 {
				t.Errorf("mid handled %d calls, want 1 (the top must not retry a no-retry)", got)
			}
			if got := sw.calls.Load(); got != 3 {
				t.Errorf("bottom saw %d attempts, want 3 (the mid-tier retries)", got)
			}
			if got := len(topWaits.get()); got != 0 {
				t.Errorf("top waited %d times, want 0", got)
			}

			// Bottom says no-retry itself: nobody retries.
			sw.rej.Store(rej(levee.Overloaded, 0, true))
			sw.calls.Store(0)
			if _, err := callEcho(ctx, toMid, "x"); status.Code(err) != codes.Unavailable {
				t.Fatalf("no-retry chain: %v", err)
			}
			if got := sw.calls.Load(); got != 1 {
				t.Errorf("bottom saw %d attempts of a no-retry, want 1", got)
			}

			// Quota passes through with its delay (top without retries).
			sw.rej.Store(rej(levee.Quota, 400*time.Millisecond, false))
			single := testClient(&waits{}, retry.Policy{MaxAttempts: 1})
			toMid1 := dial(t, midTarget, append(single.DialOptions(), midDial)...)
			_, err = callEcho(ctx, toMid1, "x")
			if status.Code(err) != codes.ResourceExhausted {
				t.Fatalf("quota chain: %v, want ResourceExhausted", err)
			}
			if r := Rejection(err, nil); r == nil || r.Reason != levee.Quota || r.RetryAfter != 400*time.Millisecond {
				t.Errorf("top reads %s, want quota with the bottom's 400ms", fmtRej(r))
			}

			// A deadline the bottom cannot meet: DEADLINE_EXCEEDED all the way.
			sw.rej.Store(nil)
			_, err = callEcho(ctx, toMid, "stage")
			if status.Code(err) != codes.DeadlineExceeded || !errorsIsDeadline(err) {
				t.Errorf("deadline chain: %v, want DeadlineExceeded carrying levee.ErrDeadline", err)
			}

			// The bottom's own admission controller overloaded (a scripted
			// signal): SHEDDABLE work is shed at the bottom, the mid-tier
			// retries it, the top gets "no-retry" and does not retry.
			bottomSig.set(10)
			stepUntil(t, bottomCtl, nil, "acme")
			before := bottomCtl.Snapshot().Rejected[levee.Sheddable][levee.Overloaded]
			midCalls.Store(0)
			shedCtx := levee.WithCriticality(ctx, levee.Sheddable)
			_, err = callEcho(shedCtx, toMid, "x")
			if r := levee.AsRejected(err); status.Code(err) != codes.Unavailable || r == nil || !r.NoRetry {
				t.Errorf("admit-overloaded chain: %v (%s), want Unavailable no-retry", err, fmtRej(r))
			}
			// 3 attempts, fewer if the controller's advised delay does not
			// fit in the deadline (the mid-tier never waits past it).
			if got := bottomCtl.Snapshot().Rejected[levee.Sheddable][levee.Overloaded] - before; got < 1 || got > 3 {
				t.Errorf("bottom's controller rejected %d attempts, want 1 to 3", got)
			}
			if got := midCalls.Load(); got != 1 {
				t.Errorf("mid handled %d calls, want 1", got)
			}
		})
	}
}

func errorsIsDeadline(err error) bool {
	r := levee.AsRejected(err)
	return r != nil && r.Reason == levee.Deadline
}
