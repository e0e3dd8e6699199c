package leveegrpc

import (
	"context"
	"time"

	"google.golang.org/grpc/stats"
)

// StatsHandler returns the grpc stats.Handler that measures each call's
// queueing delay for WithQueueDelay (install it with grpc.StatsHandler;
// ServerOptions does). It costs what any stats handler costs in grpc-go
// (the events it allocates for every call) and a clock read; it does
// nothing without WithQueueDelay.
func (s *Server) StatsHandler() stats.Handler { return statsHandler{s} }

type statsHandler struct{ s *Server }

// TagRPC runs on the goroutine gRPC starts for the call, before the
// request message is read: the tap's entry to here is the wait for a
// core, which no caller can lengthen.
func (h statsHandler) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	if a := tapped(ctx); a != nil {
		a.tagged.Store(true)
		if q := h.s.queue; q != nil && !a.arrival.IsZero() {
			q.Observe(time.Since(a.arrival))
		}
	}
	return ctx
}

func (statsHandler) HandleRPC(context.Context, stats.RPCStats) {}

func (statsHandler) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (statsHandler) HandleConn(context.Context, stats.ConnStats) {}

// check looks at the Server's first call reaching an interceptor for
// misuse the types cannot prevent, and reports it once.
func (s *Server) check(ctx context.Context, method string) {
	if !s.checked.CompareAndSwap(false, true) {
		return
	}
	a := tapped(ctx)
	switch {
	case a == nil:
		s.report(ProblemNoTap, "calls reach levee's interceptors without its tap (grpc.InTapHandle(s.InHandle)): rejections cost a decoded message and the queue-delay signal sees nothing; use ServerOptions")
	case s.queue != nil && !a.tagged.Load():
		s.report(ProblemNoStatsHandler, "the queue-delay signal is set but levee's stats handler is not installed (grpc.StatsHandler(s.StatsHandler())): it sees nothing; use ServerOptions")
	}
	if s.unfedConcurrency() {
		s.report(ProblemUnfedConcurrency, "the controller has a concurrency signal the server does not feed: calls waiting inside handlers (a slow dependency) are invisible; pass leveegrpc.WithConcurrency(set.Concurrency) (Protect does)")
	}
}

// unfedConcurrency reports that the controller steers by a concurrency
// signal that s does not feed.
func (s *Server) unfedConcurrency() bool {
	if s.c == nil || s.conc != nil {
		return false
	}
	for _, g := range s.c.Snapshot().Signals {
		if g.Name == "concurrency" {
			return true
		}
	}
	return false
}
