package leveegrpc

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
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
	target, dopt := startServer(b, bufNet, &echoImpl{}, s.server()...)
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
// "interleaved" alternates plain and levee calls in one loop, so that both
// see the same machine load, and reports their ratio as overhead-%: the
// number to quote on a shared machine.
//
//	go test -run '^$' -bench UnaryOverhead -benchmem -count 5 ./leveegrpc
func BenchmarkUnaryOverhead(b *testing.B) {
	setups := []benchSetup{
		plainSetup,
		leveeSetup,
		leveeSetup.with("levee-propagating", func(s *benchSetup) {
			s.call = levee.Call{Criticality: levee.SheddablePlus, Tenant: "bench", Attempt: 1}
		}),
		leveeSetup.with("levee-default-timeout", func(s *benchSetup) { s.noDeadline = true }),
		leveeSetup.with("levee-server-only", func(s *benchSetup) { s.client = plainSetup.client }),
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
	b.Run("interleaved", func(b *testing.B) {
		plainCC, plainCtx := plainSetup.conn(b)
		leveeCC, leveeCtx := leveeSetup.conn(b)
		var plainNs, leveeNs time.Duration
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			// Alternate which goes first, so neither always follows the other.
			for j := range 2 {
				cc, ctx, acc := plainCC, plainCtx, &plainNs
				if (i+j)%2 == 1 {
					cc, ctx, acc = leveeCC, leveeCtx, &leveeNs
				}
				start := time.Now()
				if _, err := callEcho(ctx, cc, "x"); err != nil {
					b.Fatal(err)
				}
				*acc += time.Since(start)
			}
			i++
		}
		n := float64(b.N)
		b.ReportMetric(float64(plainNs)/n, "plain-ns/call")
		b.ReportMetric(float64(leveeNs)/n, "levee-ns/call")
		b.ReportMetric(100*(float64(leveeNs)/float64(plainNs)-1), "overhead-%")
	})
}
