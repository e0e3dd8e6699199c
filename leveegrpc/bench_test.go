package leveegrpc

import (
	"context"
	"net"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/tap"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/pressure"
)

// benchSetup is one way of wiring the benchmark's client and server.
type benchSetup struct {
	name   string
	server func() []grpc.ServerOption
	client func() []grpc.DialOption
	call   levee.Call // carried by the caller's context
	// noDeadline: the caller sets no deadline (levee then applies its
	// default timeout, which costs a timer per call).
	noDeadline bool
	net        network
}

var (
	plainSetup = benchSetup{name: "plain", server: func() []grpc.ServerOption { return nil }, client: func() []grpc.DialOption { return nil }}
	leveeSetup = benchSetup{name: "levee",
		server: func() []grpc.ServerOption { return NewServer(admit.New()).ServerOptions() },
		client: func() []grpc.DialOption { return NewClient().DialOptions() }}
)

func (s benchSetup) with(name string, f func(*benchSetup)) benchSetup {
	s.name = name
	f(&s)
	return s
}

// conn serves the echo service wired as s and returns a connection to it
// and the caller's context.
func (s benchSetup) conn(b *testing.B) (*grpc.ClientConn, context.Context) {
	target, dopt := startServer(b, s.net, &echoImpl{}, s.server()...)
	cc := dial(b, target, append(s.client(), dopt)...)
	ctx := context.Background()
	if s.call != (levee.Call{}) {
		ctx = levee.WithCall(ctx, s.call)
	}
	if !s.noDeadline {
		// A request's deadline, as a server handler's context has it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Hour)
		b.Cleanup(cancel)
	}
	if _, err := callEcho(ctx, cc, "warm-up"); err != nil {
		b.Fatal(err)
	}
	return cc, ctx
}

// BenchmarkUnaryOverhead measures a unary call over bufconn without levee
// ("plain") and with all of it ("levee": tap, server interceptors, client
// interceptors with throttling, retry bookkeeping and deadline shaving), in
// the same run. The caller's context carries a deadline, as a server
// handler's does; "levee-propagating" also sends a criticality, tenant and
// attempt, and "levee-default-timeout" has no deadline (levee adds one).
// "interleaved" (bufconn) and "interleaved-tcp" (loopback TCP) alternate
// blocks of 100 plain and 100 levee calls (one b.N iteration is one block),
// so that both see the same machine load, and report the ratios of their
// wall time (overhead-%) and of the process CPU time they used
// (cpu-overhead-%): the numbers to quote on a shared machine.
//
//	go test -run '^$' -bench UnaryOverhead -benchmem -count 5 ./leveegrpc
//	go test -run '^$' -bench 'UnaryOverhead/interleaved' -benchtime 1000x -count 10 ./leveegrpc
func BenchmarkUnaryOverhead(b *testing.B) {
	setups := []benchSetup{
		plainSetup,
		leveeSetup,
		leveeSetup.with("levee-propagating", func(s *benchSetup) {
			s.call = levee.Call{Criticality: levee.SheddablePlus, Tenant: "bench", Attempt: 1}
		}),
		leveeSetup.with("levee-default-timeout", func(s *benchSetup) { s.noDeadline = true }),
		leveeSetup.with("levee-server-only", func(s *benchSetup) { s.client = plainSetup.client }),
		// The server as Protect wires it: the queue-delay and concurrency
		// signals, so also the stats handler.
		leveeSetup.with("levee-server-signals", func(s *benchSetup) {
			s.client = plainSetup.client
			s.server = func() []grpc.ServerOption {
				return NewServer(admit.New(), WithQueueDelay(pressure.NewQueueDelay()), WithConcurrency(pressure.NewConcurrency())).ServerOptions()
			}
		}),
		leveeSetup.with("levee-client-only", func(s *benchSetup) { s.server = plainSetup.server }),
	}
	for _, s := range setups {
		b.Run(s.name, func(b *testing.B) {
			cc, ctx := s.conn(b)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := callEcho(ctx, cc, "x"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, n := range []network{bufNet, tcpNet} {
		name := "interleaved"
		if n == tcpNet {
			name = "interleaved-tcp"
		}
		b.Run(name, func(b *testing.B) { interleaved(b, n, leveeSetup) })
	}
	// Which side costs what (bufconn).
	b.Run("interleaved-server-only", func(b *testing.B) {
		interleaved(b, bufNet, leveeSetup.with("", func(s *benchSetup) { s.client = plainSetup.client }))
	})
	b.Run("interleaved-client-only", func(b *testing.B) {
		interleaved(b, bufNet, leveeSetup.with("", func(s *benchSetup) { s.server = plainSetup.server }))
	})
}

// interleaved alternates blocks of plain calls and calls wired as l, over n.
func interleaved(b *testing.B, n network, l benchSetup) {
	p := plainSetup
	p.net, l.net = n, n
	plainCC, plainCtx := p.conn(b)
	leveeCC, leveeCtx := l.conn(b)
	// Blocks of calls alternate between plain and levee; each block's wall
	// time and process CPU time (user+system, less sensitive to other
	// processes on a shared machine) go to its side.
	const block = 100
	var wall, cpu [2]time.Duration
	var calls [2]int
	b.ReportAllocs()
	side := 0
	for b.Loop() {
		cc, ctx := plainCC, plainCtx
		if side == 1 {
			cc, ctx = leveeCC, leveeCtx
		}
		start, cpu0 := time.Now(), processCPU()
		for range block {
			if _, err := callEcho(ctx, cc, "x"); err != nil {
				b.Fatal(err)
			}
		}
		wall[side] += time.Since(start)
		cpu[side] += processCPU() - cpu0
		calls[side] += block
		side ^= 1
	}
	if calls[0] == 0 || calls[1] == 0 {
		return
	}
	per := func(d time.Duration, n int) float64 { return float64(d) / float64(n) }
	b.ReportMetric(per(wall[0], calls[0]), "plain-ns/call")
	b.ReportMetric(per(wall[1], calls[1]), "levee-ns/call")
	b.ReportMetric(100*(per(wall[1], calls[1])/per(wall[0], calls[0])-1), "overhead-%")
	b.ReportMetric(100*(per(cpu[1], calls[1])/per(cpu[0], calls[0])-1), "cpu-overhead-%")
}

// processCPU returns the CPU time (user + system) the process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAcceptPath measures levee's own work per call, without gRPC's
// transport: the server's tap and interceptor admitting a request (with
// the stream context gRPC would give them) and the client interceptor
// around an invoker that succeeds at once.
//
//	go test -run '^$' -bench AcceptPath -benchmem ./leveegrpc
func BenchmarkAcceptPath(b *testing.B) {
	ctl := admit.New()
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	go ctl.Run(runCtx) // the coarse clock, as in production
	s := NewServer(ctl)
	md := metadata.Pairs("levee-criticality", "SHEDDABLE_PLUS", "levee-attempt", "0", ":authority", "x", "content-type", "application/grpc")
	base := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4}})
	base = metadata.NewIncomingContext(base, md)
	info := &grpc.UnaryServerInfo{FullMethod: echoMethod}
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	b.Run("server-tap+interceptor", func(b *testing.B) {
		b.ReportAllocs()
		tinfo := &tap.Info{FullMethodName: echoMethod, Header: md}
		for b.Loop() {
			ctx, cancel := context.WithCancel(base) // the stream's context
			ctx, err := s.InHandle(ctx, tinfo)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.UnaryServerInterceptor(ctx, "x", info, handler); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	b.Run("server-interceptor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(base)
			if _, err := s.UnaryServerInterceptor(ctx, "x", info, handler); err != nil {
				b.Fatal(err)
			}
			cancel()
		}
	})
	b.Run("stream-context", func(b *testing.B) { // the baseline both include
		b.ReportAllocs()
		for b.Loop() {
			_, cancel := context.WithCancel(base)
			cancel()
		}
	})
	cc, err := grpc.NewClient("passthrough:///bench", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	c := NewClient()
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return nil
	}
	for _, bc := range []struct {
		name string
		call levee.Call
	}{{"client-default-call", levee.Call{}}, {"client-propagating", levee.Call{Criticality: levee.SheddablePlus, Tenant: "t"}}} {
		b.Run(bc.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(levee.WithCall(context.Background(), bc.call), time.Hour)
			defer cancel()
			b.ReportAllocs()
			for b.Loop() {
				if err := c.UnaryClientInterceptor(ctx, echoMethod, "x", "y", cc, invoker); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRejection measures what levee's own code costs a refusal: the
// tap refusing a call (a controller forced to shed everything), and the
// rejection's status built afresh against answered from the cache.
//
//	go test -run '^$' -bench Rejection -benchmem ./leveegrpc
func BenchmarkRejection(b *testing.B) {
	b.Run("tap-refusal", func(b *testing.B) {
		ctl := admit.New()
		runCtx, stop := context.WithCancel(context.Background())
		defer stop()
		go ctl.Run(runCtx) // the coarse clock, as in production
		ctl.ForceShed(4, time.Now().Add(time.Hour))
		s := NewServer(ctl)
		md := metadata.Pairs(":authority", "x", "content-type", "application/grpc")
		base := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4}})
		base = metadata.NewIncomingContext(base, md)
		tinfo := &tap.Info{FullMethodName: echoMethod, Header: md}
		for i := 0; ; i++ { // until the forced level is in the plan
			ctx, cancel := context.WithCancel(base)
			_, err := s.InHandle(ctx, tinfo)
			cancel()
			if err != nil {
				break
			}
			if i == 1000 {
				b.Fatal("the forced shed never took effect")
			}
			time.Sleep(time.Millisecond)
		}
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(base) // the stream's context
			if _, err := s.InHandle(ctx, tinfo); err == nil {
				b.Fatal("admitted under a forced shed")
			}
			cancel()
		}
	})
	rej := &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 1100 * time.Millisecond}
	b.Run("status-built", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = build(rej).err
		}
	})
	b.Run("status-cached", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = rejectErr(rej)
		}
	})
}
