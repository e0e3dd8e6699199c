package leveegrpc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee/admit"
)

// TestUnaryRunQueue: with a run bound of 1, a second unary call waits for
// the first to finish before its handler runs, and a call whose deadline
// ends while it waits fails with DeadlineExceeded without its handler
// running — whether the interceptor or the tap admitted them.
func TestUnaryRunQueue(t *testing.T) {
	for _, inst := range []install{interceptorsOnly, tapAndInterceptors} {
		t.Run(inst.String(), func(t *testing.T) { testUnaryRunQueue(t, inst) })
	}
}

func testUnaryRunQueue(t *testing.T, inst install) {
	ctl := admit.New(admit.WithRunBound(1))
	s := NewServer(ctl)
	release := make(chan struct{})
	var running, peak atomic.Int32
	impl := &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if in == "hold" {
			<-release
		}
		running.Add(-1)
		return in, nil
	}}
	target, dopt := startServer(t, bufNet, impl, inst.options(s)...)
	cc := dial(t, target, dopt)
	call := func(ctx context.Context, in string) <-chan error {
		out := make(chan error, 1)
		go func() { _, err := callEcho(ctx, cc, in); out <- err }()
		return out
	}

	first := call(context.Background(), "hold")
	waitFor(t, "the first call to run", func() bool { return running.Load() == 1 })
	second := call(context.Background(), "second")
	waitFor(t, "the second call to wait", func() bool { return ctl.Snapshot().Waiting == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := <-call(ctx, "late"); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("call whose deadline ended in the run queue: %v, want DeadlineExceeded", err)
	}
	close(release)
	for i, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Errorf("call %d: %v", i+1, err)
		}
	}
	if p := peak.Load(); p != 1 {
		t.Errorf("%d handlers ran at once under a bound of 1", p)
	}
	if n := impl.calls.Load(); n != 2 {
		t.Errorf("%d handler runs, want 2 (the late call never starts)", n)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// TestStreamRunQueue: a stream holds a run slot while it starts, until its
// handler's first message: under a bound of 1 a second stream's handler
// and a unary call wait while the first stream's handler prepares, and
// run once it reads its first message, though it stays open.
func TestStreamRunQueue(t *testing.T) {
	for _, inst := range []install{interceptorsOnly, tapAndInterceptors} {
		t.Run(inst.String(), func(t *testing.T) {
			ctl := admit.New(admit.WithRunBound(1))
			s := NewServer(ctl)
			prepare := make(chan struct{})
			var started atomic.Int32
			impl := &echoImpl{chatStart: func(ctx context.Context) {
				if started.Add(1) == 1 {
					<-prepare
				}
			}}
			target, dopt := startServer(t, bufNet, impl, inst.options(s)...)
			cc := dial(t, target, dopt)
			open := func() grpc.ClientStream {
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				cs, err := cc.NewStream(ctx, chatDesc, chatMethod)
				if err != nil {
					t.Fatal(err)
				}
				return cs
			}
			first := open()
			waitFor(t, "the first stream's handler", func() bool { return started.Load() == 1 })
			second := open()
			unary := make(chan error, 1)
			go func() { _, err := callEcho(context.Background(), cc, "x"); unary <- err }()
			waitFor(t, "a stream and a call waiting", func() bool { return ctl.Snapshot().Waiting == 2 })
			if n := started.Load(); n != 1 {
				t.Fatalf("%d stream handlers started under a bound of 1 while the first prepares", n)
			}
			close(prepare)
			// The first stream reads its first message: its slot is free,
			// though it stays open.
			for _, cs := range []grpc.ClientStream{first, second} {
				if err := cs.SendMsg(wrapperspb.String("m")); err != nil {
					t.Fatal(err)
				}
				if err := cs.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					t.Fatal(err)
				}
			}
			if err := <-unary; err != nil {
				t.Errorf("unary call behind the streams: %v", err)
			}
			if sn := ctl.Snapshot(); sn.Running != 0 || sn.Waiting != 0 {
				t.Errorf("two open streams past their first message: running %d, waiting %d; want 0, 0", sn.Running, sn.Waiting)
			}
		})
	}
}
