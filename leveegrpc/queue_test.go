package leveegrpc

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/tap"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/pressure"
)

// recorder is a QueueObserver keeping what it observed.
type recorder struct {
	mu sync.Mutex
	d  []time.Duration
}

func (r *recorder) Observe(d time.Duration) {
	r.mu.Lock()
	r.d = append(r.d, d)
	r.mu.Unlock()
}

func (r *recorder) take() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.d
	r.d = nil
	return out
}

// TestQueueDelayStamps checks what the queue-delay signal is fed: the time
// from the tap's entry to the start of the call's goroutine. A server
// slow to take the call up (here the tap itself takes 50 ms) shows in it,
// a client slow to send its message after its headers does not, exempt
// methods are not fed, and nothing is fed without the stats handler (a
// problem reported once).
func TestQueueDelayStamps(t *testing.T) {
	const slowServer = 50 * time.Millisecond
	const slowSender = time.Second
	q := &recorder{}
	var problems []string
	s := NewServer(admit.New(), WithQueueDelay(q), WithProblemReporter(func(p, _ string) { problems = append(problems, p) }))
	slowTap := func(ctx context.Context, info *tap.Info) (context.Context, error) {
		ctx, err := s.InHandle(ctx, info)
		time.Sleep(slowServer)
		return ctx, err
	}
	opts := append(s.ServerOptions()[1:], grpc.InTapHandle(slowTap))
	target, dopt := startServer(t, tcpNet, &echoImpl{}, opts...)
	cc := dial(t, target, dopt)

	if _, err := callEcho(context.Background(), cc, "x"); err != nil {
		t.Fatal(err)
	}
	if got := q.take(); len(got) != 1 || got[0] < slowServer {
		t.Errorf("a call taken up %v late: observed %v, want one value ≥ %v", slowServer, got, slowServer)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs, err := cc.NewStream(ctx, chatDesc, chatMethod)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(slowSender) // headers sent, the message a second later
	if err := cs.SendMsg(wrapperspb.String("late")); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		t.Fatal(err)
	}
	if got := q.take(); len(got) != 1 || got[0] >= slowSender {
		t.Errorf("a slow sender: observed %v, want one value below its own delay %v", got, slowSender)
	}

	if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if got := q.take(); len(got) != 0 {
		t.Errorf("a health check fed the signal: %v", got)
	}
	if len(problems) != 0 {
		t.Errorf("problems %v, want none", problems)
	}

	// Without the stats handler: nothing observed, reported once.
	s2 := NewServer(admit.New(), WithQueueDelay(q), WithProblemReporter(func(p, _ string) { problems = append(problems, p) }))
	target, dopt = startServer(t, bufNet, &echoImpl{}, s2.ServerOptions()[:3]...)
	cc = dial(t, target, dopt)
	for range 2 {
		if _, err := callEcho(context.Background(), cc, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if got := q.take(); len(got) != 0 || len(problems) != 1 || problems[0] != ProblemNoStatsHandler {
		t.Errorf("without the stats handler: observed %v, problems %v; want none, [%s]", got, problems, ProblemNoStatsHandler)
	}
}

// TestConcurrencySignal checks what the Server reports to the concurrency
// signal, however the call was admitted: a unary call is in flight while
// its handler runs and not after; a stream only until its first message.
func TestConcurrencySignal(t *testing.T) {
	for _, inst := range []install{interceptorsOnly, tapAndInterceptors} {
		t.Run(inst.String(), func(t *testing.T) {
			c := pressure.NewConcurrency()
			s := NewServer(admit.New(), WithConcurrency(c))
			inside := make(chan int, 1)
			impl := &echoImpl{
				unary:     func(ctx context.Context, in string) (string, error) { inside <- c.InFlight(); return in, nil },
				chatStart: func(ctx context.Context) { inside <- c.InFlight() },
			}
			target, dopt := startServer(t, bufNet, impl, inst.options(s)...)
			cc := dial(t, target, dopt)
			if _, err := callEcho(context.Background(), cc, "x"); err != nil {
				t.Fatal(err)
			}
			if in, after := <-inside, c.InFlight(); in != 1 || after != 0 {
				t.Errorf("unary: in flight inside the handler %d, after %d; want 1, 0", in, after)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cs, err := cc.NewStream(ctx, chatDesc, chatMethod)
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
				t.Fatal(err)
			}
			if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
				t.Fatal(err)
			}
			if in, open := <-inside, c.InFlight(); in != 1 || open != 0 {
				t.Errorf("stream: in flight before its first message %d, open after it %d; want 1, 0", in, open)
			}
		})
	}
}

// TestPauser: an admitted unary call's context carries a levee.Pauser
// (the tap's ticket, or the interceptor's own node) that takes the call
// out of the concurrency signal's count while a client call made with it
// waits between attempts, and puts it back.
func TestPauser(t *testing.T) {
	for _, inst := range []install{interceptorsOnly, tapAndInterceptors} {
		t.Run(inst.String(), func(t *testing.T) {
			c := pressure.NewConcurrency()
			s := NewServer(admit.New(), WithConcurrency(c))
			type seen struct {
				ok              bool
				paused, resumed int
			}
			inside := make(chan seen, 1)
			impl := &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
				p := levee.PauserFrom(ctx)
				if p == nil {
					inside <- seen{}
					return in, nil
				}
				p.Pause()
				paused := c.InFlight()
				p.Unpause()
				inside <- seen{true, paused, c.InFlight()}
				return in, nil
			}}
			target, dopt := startServer(t, bufNet, impl, inst.options(s)...)
			cc := dial(t, target, dopt)
			if _, err := callEcho(context.Background(), cc, "x"); err != nil {
				t.Fatal(err)
			}
			if got := <-inside; !got.ok || got.paused != 0 || got.resumed != 1 {
				t.Errorf("Pauser found %v, in flight paused %d, after Unpause %d; want true, 0, 1", got.ok, got.paused, got.resumed)
			}
			if after := c.InFlight(); after != 0 {
				t.Errorf("in flight after the call %d; want 0", after)
			}
		})
	}
}

// TestUnfedConcurrency: a Server whose controller steers by a concurrency
// signal it does not feed says so once; fed, it says nothing.
func TestUnfedConcurrency(t *testing.T) {
	for _, fed := range []bool{false, true} {
		conc := pressure.NewConcurrency()
		var problems []string
		opts := []Option{WithProblemReporter(func(p, _ string) { problems = append(problems, p) })}
		if fed {
			opts = append(opts, WithConcurrency(conc))
		}
		s := NewServer(admit.New(admit.WithSignals(conc)), opts...)
		target, dopt := startServer(t, bufNet, &echoImpl{}, s.ServerOptions()...)
		cc := dial(t, target, dopt)
		for range 2 {
			if _, err := callEcho(context.Background(), cc, "x"); err != nil {
				t.Fatal(err)
			}
		}
		want := []string{ProblemUnfedConcurrency}
		if fed {
			want = nil
		}
		if fmt.Sprint(problems) != fmt.Sprint(want) {
			t.Errorf("fed %v: problems %v; want %v", fed, problems, want)
		}
	}
}
