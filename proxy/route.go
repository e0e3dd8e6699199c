package proxy

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// reqState is one proxied request's state: the edge rules' verdict, what
// the proxy did, and the status it answered. It is also the
// ResponseWriter the edge writes to, so that the status is seen, and the
// request's context (one allocation for the three).
type reqState struct {
	parent  context.Context
	w       http.ResponseWriter
	start   time.Time
	status  int
	route   *routeStats
	retries int
	fwd     bool       // the forwarder ran: the edge admitted it
	answer  answerKind // +1; 0 when a backend answered (or the edge shed)
}

type stateKey struct{}

func (s *reqState) Deadline() (time.Time, bool) { return s.parent.Deadline() }
func (s *reqState) Done() <-chan struct{}       { return s.parent.Done() }
func (s *reqState) Err() error                  { return s.parent.Err() }
func (s *reqState) Value(key any) any {
	if key == (stateKey{}) {
		return s
	}
	return s.parent.Value(key)
}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(stateKey{}).(*reqState)
	return st
}

func (s *reqState) Header() http.Header { return s.w.Header() }

func (s *reqState) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.w.WriteHeader(code)
}

func (s *reqState) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.w.Write(p)
}

// Unwrap returns the underlying ResponseWriter for http.ResponseController.
func (s *reqState) Unwrap() http.ResponseWriter { return s.w }

// Flush implements http.Flusher when the underlying writer can flush.
func (s *reqState) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.w).Flush()
}

// Hijack implements http.Hijacker when the underlying writer can hijack.
func (s *reqState) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(s.w).Hijack()
}

// latencyBuckets are the upper bounds of the per-route latency histogram.
var latencyBuckets = [...]time.Duration{
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

// routeStats counts one route's requests, lock-free.
type routeStats struct {
	name     string
	classes  [6]atomic.Uint64 // by status class: 0 = none written, 1xx..5xx
	edgeShed atomic.Uint64    // rejected by the edge's admission controller
	answers  [numAnswers]atomic.Uint64
	retries  atomic.Uint64
	buckets  [len(latencyBuckets) + 1]atomic.Uint64
	sumNanos atomic.Uint64
}

func (rs *routeStats) observe(st *reqState, now time.Time) {
	c := st.status / 100
	if c < 0 || c > 5 {
		c = 0
	}
	rs.classes[c].Add(1)
	switch {
	case st.answer > 0:
		rs.answers[st.answer-1].Add(1)
	case st.status == http.StatusServiceUnavailable || st.status == http.StatusTooManyRequests ||
		st.status == http.StatusGatewayTimeout:
		if !st.fwd {
			rs.edgeShed.Add(1)
		}
	}
	if st.retries > 0 {
		rs.retries.Add(uint64(st.retries))
	}
	d := now.Sub(st.start)
	i := 0
	for i < len(latencyBuckets) && d > latencyBuckets[i] {
		i++
	}
	rs.buckets[i].Add(1)
	rs.sumNanos.Add(uint64(max(d, 0)))
}

// maxRoutes bounds the routes counted apart; the rest share "other".
const maxRoutes = 256

// routeTable holds the routes' counters: a map read without a lock and
// replaced whole when a route first appears (route names come from the
// configuration's rules, so there are few).
type routeTable struct {
	m  atomic.Pointer[map[string]*routeStats]
	mu sync.Mutex
}

func (t *routeTable) get(name string) *routeStats {
	if name == "" {
		name = "default"
	}
	if m := t.m.Load(); m != nil {
		if rs, ok := (*m)[name]; ok {
			return rs
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := map[string]*routeStats{}
	if m := t.m.Load(); m != nil {
		if rs, ok := (*m)[name]; ok {
			return rs
		}
		old = *m
	}
	if len(old) >= maxRoutes {
		name = "other"
		if rs, ok := old[name]; ok {
			return rs
		}
	}
	next := make(map[string]*routeStats, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	rs := &routeStats{name: name}
	next[name] = rs
	t.m.Store(&next)
	return rs
}
