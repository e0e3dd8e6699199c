package leveehttp

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/pressure"
)

// WithConcurrency reports each admitted request's time in the handler to
// c, the concurrency signal (pressure.Concurrency), which sees requests
// waiting inside the handler (a dependency's connection pool, a lock):
// StartAt once the request leaves the run queue, with the time left to
// its deadline, and DoneAt when next returns, without the time next spent
// reading the request body (the caller's pace, not the server's: a slow
// uploader is suspended from the in-flight count while it sends). A
// request whose connection is hijacked, or whose response is flushed
// before next returns (a stream, a long poll), is dropped instead: its
// length is its caller's choice. The request's context carries a
// levee.Pauser: while a client call made with it waits between attempts
// (the Transport's backoff, a downstream's Retry-After) the request is out
// of the in-flight count, and the wait is not its time in the handler.
// Default: none; Protect sets its set's.
func WithConcurrency(c *pressure.Concurrency) HandlerOption {
	return func(cfg *handlerConfig) { cfg.conc = c }
}

// inHandler is a request's bookkeeping for the concurrency signal; it
// lives in the request's state, so that it costs no allocation.
type inHandler struct {
	c        *pressure.Concurrency
	start    pressure.Start
	excluded atomic.Int64 // ns spent reading the body
	stream   atomic.Bool  // flushed or hijacked: dropped at the end
	ended    atomic.Bool
	body     timedBody
	pauses   pressure.Pauses // levee.Pauser: waits between a client's attempts
}

// Pause takes the request out of the signal's count while a client call
// made with its context waits between attempts (levee.Pauser).
func (ih *inHandler) Pause() { ih.pauses.Pause(ih.c) }

// Unpause ends a Pause.
func (ih *inHandler) Unpause() { ih.pauses.Unpause(ih.c) }

// startInHandler starts the request's in-handler time and, for a request
// with a body, times the body's reads (r is the Handler's own copy).
func (st *state) startInHandler(c *pressure.Concurrency, r *http.Request) {
	ih := &st.inHandler
	ih.c = c
	now := time.Now()
	var budget time.Duration
	if dl, ok := st.parent.Deadline(); ok {
		budget = dl.Sub(now)
	}
	ih.start = c.StartAt(now, budget)
	if r.Body != nil && r.Body != http.NoBody {
		ih.body = timedBody{ReadCloser: r.Body, c: c, ih: ih}
		r.Body = &ih.body
	}
}

// endInHandler ends it, once: DoneAt, or Drop for a stream.
func (st *state) endInHandler() {
	ih := &st.inHandler
	if ih.c == nil || !ih.ended.CompareAndSwap(false, true) {
		return
	}
	c := ih.c
	now := time.Now()
	paused := ih.pauses.End(c, now)
	if ih.stream.Load() {
		c.Drop(ih.start)
		return
	}
	c.DoneAt(ih.start, now, time.Duration(ih.excluded.Load())+paused)
}

// streamed marks the request as a stream: the concurrency signal drops
// it (see WithConcurrency), and the controller learns no service time
// from it (admit.Ticket.Exclude).
func (st *state) streamed() {
	st.inHandler.stream.Store(true)
	st.ticket.Exclude()
}

// timedBody times the handler's reads of the request body: while it waits
// for the caller's bytes the request is suspended from the signal's
// in-flight count, and the time is excluded from its in-handler time.
type timedBody struct {
	io.ReadCloser
	c  *pressure.Concurrency
	ih *inHandler
}

func (b *timedBody) Read(p []byte) (int, error) {
	c := b.c
	if b.ih.ended.Load() { // read after the handler returned
		return b.ReadCloser.Read(p)
	}
	t0 := time.Now()
	c.Suspend()
	n, err := b.ReadCloser.Read(p)
	c.Resume()
	b.ih.excluded.Add(int64(time.Since(t0)))
	return n, err
}
