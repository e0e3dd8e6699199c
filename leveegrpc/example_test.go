package leveegrpc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveegrpc"
	"github.com/levee-dev/levee/retry"
)

// serve starts srv on an in-memory listener and returns a dial option
// reaching it (a real server listens on TCP instead).
func serve(srv *grpc.Server) grpc.DialOption {
	lis := bufconn.Listen(1 << 16)
	go func() { _ = srv.Serve(lis) }()
	return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
}

// Server and client wiring. The server admits each request through an
// admit.Controller (in production, with resource signals from package
// pressure and ctl.Run in the background); the client throttles, retries
// within its budget, and propagates criticality, tenant and deadline.
func Example() {
	ctl := admit.New(admit.WithRoute(leveegrpc.Method)) // service time per method
	ls := leveegrpc.NewServer(ctl,
		// Callers inside the mesh may set their criticality and tenant.
		leveegrpc.WithTrust(func(ctx context.Context) bool { return true }))
	srv := grpc.NewServer(ls.ServerOptions()...)
	defer srv.Stop()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	dialer := serve(srv)

	lc := leveegrpc.NewClient(leveegrpc.WithPolicy(retry.Policy{MaxAttempts: 3}))
	cc, err := grpc.NewClient("passthrough:///example",
		append(lc.DialOptions(), dialer, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()

	ctx := levee.WithCall(context.Background(), levee.Call{Criticality: levee.SheddablePlus, Tenant: "batch"})
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err)
	// Output: SERVING <nil>
}

// A tenant over its quota gets RESOURCE_EXHAUSTED with a delay; the client
// reads it back as a *levee.RejectedError. (The health service stands in
// for an application service here: by default it is never shed.)
func Example_quota() {
	ctl := admit.New(admit.WithQuota("batch", admit.Quota{Rate: 0.001, Burst: 1}))
	ls := leveegrpc.NewServer(ctl,
		leveegrpc.WithTrust(func(ctx context.Context) bool { return true }),
		leveegrpc.WithExempt(nil))
	srv := grpc.NewServer(ls.ServerOptions()...)
	defer srv.Stop()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	dialer := serve(srv)

	lc := leveegrpc.NewClient(leveegrpc.WithPolicy(retry.Policy{MaxAttempts: 1}))
	cc, err := grpc.NewClient("passthrough:///example",
		append(lc.DialOptions(), dialer, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cc.Close()

	ctx := levee.WithTenant(context.Background(), "batch")
	for range 2 {
		_, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		var ge *retry.GiveUpError
		if errors.As(err, &ge) {
			err = ge.Err // the server's own answer, before levee's client gave up
		}
		rej := levee.AsRejected(err)
		fmt.Println(status.Code(err), rej != nil && rej.Reason == levee.Quota && rej.RetryAfter > 0)
	}
	// Output:
	// OK false
	// ResourceExhausted true
}

// The mapping table: what a server sends for each rejection, and what a
// client reads back from the status alone (as after a tap rejection). The
// columns: code, grpc-retry-pushback-ms trailer, what a client reads.
func ExampleStatus() {
	for _, r := range []*levee.RejectedError{
		{Reason: levee.Overloaded, RetryAfter: 1500 * time.Millisecond},
		{Reason: levee.Overloaded, NoRetry: true},
		{Reason: levee.Throttled},
		{Reason: levee.Quota, RetryAfter: 2 * time.Second},
		{Reason: levee.Deadline, NoRetry: true},
	} {
		st := leveegrpc.Status(r)
		pushback := strings.Join(leveegrpc.Pushback(r).Get("grpc-retry-pushback-ms"), ",")
		fmt.Printf("%-18v %-5s %v\n", st.Code(), pushback, leveegrpc.Rejection(st.Err(), nil))
	}
	// Output:
	// Unavailable        1500  levee: rejected: overloaded; retry after 1.5s
	// Unavailable        -1    levee: rejected: overloaded; no-retry
	// Unavailable        -1    levee: rejected: overloaded; no-retry
	// ResourceExhausted  2000  levee: rejected: quota; retry after 2s
	// DeadlineExceeded         levee: rejected: deadline; no-retry
}

// A mid-tier handler returns the error of its downstream call through Error
// (or as it is, behind levee's interceptors): an overloaded dependency
// becomes "overloaded; no-retry" for the caller, so only one layer retries.
func ExampleError() {
	downstream := &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second}
	err := leveegrpc.Error(fmt.Errorf("fetch profile: %w", downstream))
	fmt.Println(status.Code(err), leveegrpc.Rejection(err, nil))
	// Output: Unavailable levee: rejected: overloaded; no-retry
}
