package leveegrpc

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// TestServerCountsItsOwnRejections: a call whose budget is already spent is
// answered DEADLINE_EXCEEDED by the tap or an interceptor, before
// admission, and counted once in the controller with its criticality,
// whichever parts are installed; health checks are counted once, as
// probes.
func TestServerCountsItsOwnRejections(t *testing.T) {
	for _, inst := range installs {
		for _, kind := range []string{"unary", "stream"} {
			t.Run(fmt.Sprintf("%v/%s", inst, kind), func(t *testing.T) {
				ctl := admit.New()
				s := NewServer(ctl)
				impl := &echoImpl{}
				target, dopt := startServer(t, bufNet, impl, inst.options(s)...)
				cc := dial(t, target, dopt)
				ctx := metadata.AppendToOutgoingContext(context.Background(),
					"levee-criticality", "SHEDDABLE", "levee-timeout-ms", "0")
				var err error
				if kind == "unary" {
					_, err = callEcho(ctx, cc, "x")
				} else {
					err, _ = rejectedStream(ctx, cc)
				}
				if status.Code(err) != codes.DeadlineExceeded {
					t.Fatalf("err = %v, want DEADLINE_EXCEEDED", err)
				}
				snap := ctl.Snapshot()
				for cr := range levee.NumCriticalities {
					want := uint64(0)
					if levee.Criticality(cr) == levee.Sheddable {
						want = 1
					}
					if got := snap.Rejected[cr][levee.Deadline]; got != want {
						t.Errorf("%v: %d deadline rejections counted, want %d", levee.Criticality(cr), got, want)
					}
				}
				if impl.calls.Load() != 0 {
					t.Errorf("handler ran %d times, want 0", impl.calls.Load())
				}
				if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
					t.Fatalf("health check: %v", err)
				}
				if got := s.Probes(); got != 1 {
					t.Errorf("Probes() = %d after one health check, want 1", got)
				}
			})
		}
	}
}
