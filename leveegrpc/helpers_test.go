package leveegrpc

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The test service is registered by hand (no protoc): levee.test.Echo with
// a unary Echo and a bidirectional Chat, both on wrapperspb.StringValue.
const (
	echoMethod = "/levee.test.Echo/Echo"
	chatMethod = "/levee.test.Echo/Chat"
)

type echoService interface {
	echo(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error)
	chat(stream grpc.ServerStream) error
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "levee.test.Echo",
	HandlerType: (*echoService)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Echo",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			if interceptor == nil {
				return srv.(echoService).echo(ctx, in)
			}
			info := &grpc.UnaryServerInfo{Server: srv, FullMethod: echoMethod}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(echoService).echo(ctx, req.(*wrapperspb.StringValue))
			}
			return interceptor(ctx, in, info, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, stream grpc.ServerStream) error {
			return srv.(echoService).chat(stream)
		},
	}},
}

// echoImpl answers with a function of the request's context: what the
// server saw is what the test checks.
type echoImpl struct {
	unary func(ctx context.Context, in string) (string, error)
	// chatStart runs when a chat's handler starts, before its first
	// message.
	chatStart func(ctx context.Context)
	// calls counts handler runs (unary and stream).
	calls atomic.Int64
}

func (e *echoImpl) echo(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	e.calls.Add(1)
	if e.unary == nil {
		return in, nil
	}
	out, err := e.unary(ctx, in.GetValue())
	if err != nil {
		return nil, err
	}
	return wrapperspb.String(out), nil
}

// chat echoes every message until the client closes its side or the
// stream's context ends.
func (e *echoImpl) chat(stream grpc.ServerStream) error {
	e.calls.Add(1)
	if e.chatStart != nil {
		e.chatStart(stream.Context())
	}
	for {
		in := new(wrapperspb.StringValue)
		if err := stream.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := stream.SendMsg(in); err != nil {
			return err
		}
	}
}

func callEcho(ctx context.Context, cc grpc.ClientConnInterface, in string, opts ...grpc.CallOption) (string, error) {
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, echoMethod, wrapperspb.String(in), out, opts...)
	return out.GetValue(), err
}

var chatDesc = &grpc.StreamDesc{StreamName: "Chat", ServerStreams: true, ClientStreams: true}

// network selects the transport of a test server.
type network int

const (
	bufNet network = iota
	tcpNet
)

func (n network) String() string {
	if n == tcpNet {
		return "tcp"
	}
	return "bufconn"
}

// startServer serves impl over n with opts and returns the listener's dial
// target and a dial option; everything stops at the end of the test.
func startServer(t testing.TB, n network, impl echoService, opts ...grpc.ServerOption) (string, grpc.DialOption) {
	t.Helper()
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&echoDesc, impl)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	var (
		lis    net.Listener
		target string
		dial   grpc.DialOption
	)
	switch n {
	case tcpNet:
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("listen: %v", err)
		}
		lis, target = l, "passthrough:///"+l.Addr().String()
		dial = grpc.WithTransportCredentials(insecure.NewCredentials())
	default:
		bl := bufconn.Listen(1 << 20)
		lis, target = bl, "passthrough:///bufnet"
		dial = grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return bl.DialContext(ctx) })
	}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return target, dial
}

// dial connects to target; the connection closes at the end of the test.
func dial(t testing.TB, target string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry()}, opts...)
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", target, err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// scripted is a levee.Signal whose value the test sets.
type scripted struct {
	v atomic.Uint64
}

func (s *scripted) Name() string    { return "scripted" }
func (s *scripted) Target() float64 { return 1 }
func (s *scripted) Value() float64  { return math.Float64frombits(s.v.Load()) }
func (s *scripted) set(v float64)   { s.v.Store(math.Float64bits(v)) }

// t0 is the virtual start time of the admission controllers in tests.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
