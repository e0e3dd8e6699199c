package leveegrpc

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/levee-dev/levee/admit"
)

// TestUnaryRunQueue: with the interceptors and a run bound of 1, a second
// unary call waits for the first to finish before its handler runs, and a
// call whose deadline ends while it waits fails with DeadlineExceeded
// without its handler running.
func TestUnaryRunQueue(t *testing.T) {
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
	target, dopt := startServer(t, bufNet, impl, interceptorsOnly.options(s)...)
	cc := dial(t, target, dopt)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	call := func(ctx context.Context, in string) <-chan error {
		out := make(chan error, 1)
		go func() { _, err := callEcho(ctx, cc, in); out <- err }()
		return out
	}

	first := call(context.Background(), "hold")
	waitFor("the first call to run", func() bool { return running.Load() == 1 })
	second := call(context.Background(), "second")
	waitFor("the second call to wait", func() bool { return ctl.Snapshot().Waiting == 1 })
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
