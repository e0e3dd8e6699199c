package grpclab

import (
	"context"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loopback"
)

// TestBackendsShareCalibration: whichever of an HTTP backend (package
// loopback) and a gRPC one starts first for a cost, the other runs its
// calibrated work, so the lab's two columns compare the same work.
func TestBackendsShareCalibration(t *testing.T) {
	ctx := context.Background()
	http := func(cost time.Duration) int {
		b, err := loopback.StartBackend(ctx, backend.None, cost, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Stop()
		return b.Work.Iterations
	}
	grpc := func(cost time.Duration) int {
		b, err := StartBackend(ctx, backend.None, cost, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Stop()
		return b.Work.Iterations
	}
	for _, tc := range []struct {
		name          string
		cost          time.Duration // one no other test uses
		first, second func(time.Duration) int
	}{
		{"HTTP then gRPC", 1357 * time.Microsecond, http, grpc},
		{"gRPC then HTTP", 1479 * time.Microsecond, grpc, http},
	} {
		a := tc.first(tc.cost)
		b := tc.second(tc.cost)
		if a <= 0 || b != a {
			t.Errorf("%s: Spin counts %d then %d, want the first one's count twice", tc.name, a, b)
		}
	}
}
