package leveegrpc

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/tap"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
)

// TestAllocs guards the allocations levee adds per call (see
// BenchmarkAcceptPath). They are not zero: the levee.Call in the handler's
// context (levee.WithCall: 2), the tap's ticket and context node (2: the
// reaper holds the ticket only, never the stream's context), the copy gRPC's
// metadata accessor makes of each levee key present (interceptor path), the
// call's levee.Pauser node with WithConcurrency and no tap (1), the
// client's shaved deadline (1) and its outgoing metadata (4, only when
// there is something to send: not for CRITICAL, attempt 0, no tenant).
func TestAllocs(t *testing.T) {
	ctl := admit.New()
	ctl.Step(time.Now()) // the coarse clock, as Run keeps it
	s := NewServer(ctl)
	sq := NewServer(ctl, WithQueueDelay(pressure.NewQueueDelay()), WithConcurrency(pressure.NewConcurrency()))
	// The overload manager's gate, at Elevated (its gate checks each call)
	// for an hour.
	om := overload.New(overload.WithPeriod(10*time.Second), overload.WithResources(
		overload.MemoryResource(func() overload.Reading { return overload.Reading{Value: 0.93} })))
	om.Step(time.Now())
	so := NewServer(ctl, WithOverload(om))
	tag := &stats.RPCTagInfo{FullMethodName: echoMethod}
	md := metadata.Pairs("levee-criticality", "SHEDDABLE_PLUS", ":authority", "x")
	base := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4}})
	base = metadata.NewIncomingContext(base, md)
	stream, cancel := context.WithCancel(base)
	defer cancel()
	info := &grpc.UnaryServerInfo{FullMethod: echoMethod}
	tinfo := &tap.Info{FullMethodName: echoMethod, Header: md}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }

	cc, err := grpc.NewClient("passthrough:///allocs", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := NewClient()
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	withDeadline := func(call levee.Call) context.Context {
		ctx, cancel := context.WithTimeout(levee.WithCall(context.Background(), call), time.Hour)
		t.Cleanup(cancel)
		return ctx
	}
	plainCall := withDeadline(levee.Call{})
	propCall := withDeadline(levee.Call{Criticality: levee.SheddablePlus, Tenant: "t"})

	tests := []struct {
		name string
		max  float64
		f    func()
	}{
		{"tap+interceptor", 3, func() {
			ctx, _ := s.InHandle(stream, tinfo)
			_, _ = s.UnaryServerInterceptor(ctx, "x", info, handler)
			tapTicket(ctx).release(nil) // as the reaper would: keep the list short
		}},
		{"tap+signals+interceptor", 3, func() {
			ctx, _ := sq.InHandle(stream, tinfo)
			ctx = sq.StatsHandler().TagRPC(ctx, tag)
			_, _ = sq.UnaryServerInterceptor(ctx, "x", info, handler)
			tapTicket(ctx).release(nil)
		}},
		{"tap+overload+interceptor", 3, func() {
			ctx, _ := so.InHandle(stream, tinfo)
			_, _ = so.UnaryServerInterceptor(ctx, "x", info, handler)
			tapTicket(ctx).release(nil)
		}},
		{"interceptor", 3, func() { _, _ = s.UnaryServerInterceptor(stream, "x", info, handler) }},
		{"signals+interceptor", 3, func() { _, _ = sq.UnaryServerInterceptor(stream, "x", info, handler) }},
		{"overload+interceptor", 3, func() { _, _ = so.UnaryServerInterceptor(stream, "x", info, handler) }},
		{"client default call", 1, func() { _ = c.UnaryClientInterceptor(plainCall, echoMethod, "x", "y", cc, invoker) }},
		{"client propagating", 5, func() { _ = c.UnaryClientInterceptor(propCall, echoMethod, "x", "y", cc, invoker) }},
	}
	for _, tt := range tests {
		got := testing.AllocsPerRun(2000, tt.f)
		t.Logf("%s: %.1f allocs per call", tt.name, got)
		if got > tt.max {
			t.Errorf("%s: %.1f allocs per call, want ≤ %.0f", tt.name, got, tt.max)
		}
	}
}
