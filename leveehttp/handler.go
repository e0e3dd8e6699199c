package leveehttp

import (
	"bufio"
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/inbound"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/pressure"
)

// Header names of levee's wire protocol (see the package documentation).
const (
	HeaderCriticality  = wire.Criticality
	HeaderTenant       = wire.Tenant
	HeaderTimeoutMs    = wire.TimeoutMs
	HeaderAttempt      = wire.Attempt
	HeaderRetryAfterMs = wire.RetryAfterMs
	HeaderReject       = wire.Reject
	HeaderLoad         = wire.Load
)

// HeaderNames names levee's headers; an empty field keeps the default (the
// Header* constants). Names are canonicalized as net/http does. The
// alternative timeout headers (grpc-timeout, X-Envoy-Expected-Rq-Timeout-Ms)
// and Retry-After belong to other protocols and keep their names. Both ends
// of a hop must agree on the names.
type HeaderNames struct {
	Criticality, Tenant, TimeoutMs, Attempt, RetryAfterMs, Reject, Load string
}

// defaultNames are the names levee uses unless told otherwise; never
// modified.
var defaultNames = HeaderNames{
	Criticality:  HeaderCriticality,
	Tenant:       HeaderTenant,
	TimeoutMs:    HeaderTimeoutMs,
	Attempt:      HeaderAttempt,
	RetryAfterMs: HeaderRetryAfterMs,
	Reject:       HeaderReject,
	Load:         HeaderLoad,
}

func (n HeaderNames) canonical() *HeaderNames {
	d := defaultNames
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&d.Criticality, n.Criticality}, {&d.Tenant, n.Tenant}, {&d.TimeoutMs, n.TimeoutMs},
		{&d.Attempt, n.Attempt}, {&d.RetryAfterMs, n.RetryAfterMs}, {&d.Reject, n.Reject}, {&d.Load, n.Load},
	} {
		if f.src != "" {
			*f.dst = textproto.CanonicalMIMEHeaderKey(f.src)
		}
	}
	return &d
}

// defaultHealthPaths are the paths a Handler never sheds unless
// WithHealthPaths says otherwise: probes must not fail because the server is
// busy (a killed overloaded instance moves its load onto its peers).
var defaultHealthPaths = [...]string{"/healthz", "/readyz", "/livez"}

// DefaultHealthPaths returns the health and readiness paths a Handler
// exempts unless WithHealthPaths replaces them: /healthz, /readyz and
// /livez (the Kubernetes conventions). It returns a new slice each time, so
// that a caller can extend it:
//
//	leveehttp.WithHealthPaths(append(leveehttp.DefaultHealthPaths(), "/ping")...)
func DefaultHealthPaths() []string { return append([]string(nil), defaultHealthPaths[:]...) }

// DefaultRetryAfter is the advice a Handler sends with an overload or quota
// rejection whose controller gave none: levee's one default, shared with
// leveegrpc.
const DefaultRetryAfter = inbound.DefaultRetryAfter

// QueueObserver receives the time each request spent between its arrival
// and the handler. *pressure.QueueDelay implements it. Observe must be safe
// for concurrent use and should not allocate.
type QueueObserver interface {
	Observe(d time.Duration)
}

// HandlerOption configures NewHandler.
type HandlerOption func(*handlerConfig)

type handlerConfig struct {
	trust      func(*http.Request) bool
	tenant     func(*http.Request) string
	health     func(path string) bool
	classify   func(*http.Request) config.Class
	route      func(*http.Request) string
	routeSet   bool // WithRoute was given (nil included)
	respond    Responder
	report     func(problem, detail string)
	loadHeader func() bool
	queue      QueueObserver
	conc       *pressure.Concurrency
	overload   *Overload
	rand       func() uint64
	now        func() time.Time
	names      *HeaderNames
}

// WithHeaderNames renames the headers the Handler reads and writes (see
// HeaderNames). Default: the Header* constants.
func WithHeaderNames(n HeaderNames) HandlerOption {
	return func(c *handlerConfig) { c.names = n.canonical() }
}

// WithTrust sets the function that says whether a request comes from a
// trusted caller (for example one authenticated by mTLS as an internal
// service). Trusted callers' Levee-Criticality is honoured in full and their
// Levee-Tenant is believed. Default: nobody is trusted, so a caller may lower
// its criticality but never raise it above CRITICAL, and its tenant comes
// from WithTenant or its address. The function runs on every request and
// should be cheap.
func WithTrust(f func(r *http.Request) bool) HandlerOption {
	return func(c *handlerConfig) { c.trust = f }
}

// WithTenant sets the function that names the tenant of a request whose
// tenant is not taken from a trusted caller's Levee-Tenant header, typically
// from authentication. An empty result falls back to the default, the
// caller's network prefix (/24 for IPv4, /64 for IPv6), so that rotating ids
// buys an abuser nothing. Results follow the header's rule: ids longer than
// 64 bytes or not printable ASCII are hashed, ids with control characters
// fall back to the default (as in leveegrpc).
func WithTenant(f func(r *http.Request) string) HandlerOption {
	return func(c *handlerConfig) { c.tenant = f }
}

// WithHealthPaths sets the complete list of health and readiness paths,
// replacing the default (DefaultHealthPaths; extend it with append to keep
// it). A GET or HEAD request whose URL path is exactly one of paths (no
// prefixes, no patterns, no query) goes straight to the next handler: it
// is never shed, never rejected for its deadline, and counted only by
// Probes. Any other method on those paths, and every other path, is
// admitted as usual, so a probe path cannot be used to bypass shedding
// with a costly request. No paths means none is exempt.
func WithHealthPaths(paths ...string) HandlerOption {
	return func(c *handlerConfig) { c.health = healthSet(paths) }
}

// healthSet returns the exact-match test for paths.
func healthSet(paths []string) func(string) bool {
	set := make(map[string]bool, len(paths))
	for _, p := range paths {
		set[p] = true
	}
	return func(path string) bool { return set[path] }
}

// WithLoadHeader adds Levee-Load (the controller's Load: max over signals of
// value ÷ target, 1.0 = at target, three decimals) to every response,
// health probes and rejections included, for load balancers. Default off.
func WithLoadHeader(on bool) HandlerOption {
	return func(c *handlerConfig) { c.loadHeader = func() bool { return on } }
}

// WithQueueDelay feeds q with each request's time between its arrival and
// the handler, rejected requests included. The arrival is the first bytes
// of the request when the server uses Listener and ConnContext (HTTP/1 only,
// see Listener), and the handler's start otherwise, which sees only the
// queueing inside the handler chain. Default: none.
func WithQueueDelay(q QueueObserver) HandlerOption {
	return func(c *handlerConfig) { c.queue = q }
}

// WithRand sets the random source used to jitter Retry-After (±25%), for
// deterministic tests. Default: math/rand/v2's per-goroutine source.
func WithRand(f func() uint64) HandlerOption {
	return func(c *handlerConfig) { c.rand = f }
}

// admitFunc and doneFunc let tests replace the controller.
type (
	admitFunc func(ctx context.Context) (admit.Ticket, error)
	doneFunc  func(t *admit.Ticket, err error)
)

// Handler is the server side of levee for net/http. Build it with
// NewHandler.
type Handler struct {
	next  http.Handler
	cfg   handlerConfig
	admit admitFunc
	done  doneFunc
	load  func() float64
	// loadCache holds the last formatted Levee-Load value.
	loadCache atomic.Pointer[loadValue]
	// rules derive each request's levee.Call and deadline.
	rules inbound.Rules[request]
	// keys are the header names rules reads, indexed by inbound.Key.
	keys [inbound.NumKeys]string
	// peers caches the default tenants of recent callers.
	peers inbound.Peers
	// count counts a rejection the Handler decides itself (caller gone,
	// budget spent) in the controller (admit.Controller.CountRejected).
	count func(levee.Criticality, levee.Reason)
	// probes counts the health requests passed through (Probes).
	probes atomic.Uint64
	// checked is set once the first request has been checked for misuse.
	checked atomic.Bool
	// unfedConc: the controller has a concurrency signal the Handler does
	// not feed (ProblemUnfedConcurrency).
	unfedConc bool
}

// request is what the call derivation reads of an HTTP request: the
// request, and the route rule it matched (WithRouter).
type request struct {
	*http.Request
	class config.Class
}

type loadValue struct {
	v float64
	s []string
}

// NewHandler returns a Handler that admits each request through c before
// calling next. For every request that is not a health probe (see
// WithHealthPaths) it:
//
//   - reads Levee-Criticality, Levee-Tenant, Levee-Attempt and the timeout
//     headers (Levee-Timeout-Ms, grpc-timeout, X-Envoy-Expected-Rq-Timeout-Ms)
//     as the package documentation describes, trusting nobody by default;
//   - refuses, without calling next or reading the body, a request whose
//     context is already done or whose time budget is spent (504, counted
//     in c as a deadline rejection of its criticality), and one the
//     controller rejects (503 overloaded, 429 quota, 504 deadline, with
//     Retry-After, Levee-Retry-After-Ms and Levee-Reject);
//   - otherwise calls next with a copy of the request whose context carries
//     the levee.Call, the earlier of the server's and the caller's deadline
//     and, when above 0, the degradation level (degrade.FromContext);
//   - reports the outcome to the controller: an error for a status ≥ 500,
//     the downstream rejection when the handler called Error or answered
//     ≥ 500 after a Transport call made with the request's context was
//     rejected (see the mapping table in the package documentation);
//     and the request's service time counted from when next has read its
//     body, never for a stream or a hijacked connection (service.go).
//
// A nil next means http.NotFoundHandler(); a nil c admits everything. The
// caller's request is never modified. The Handler is safe for concurrent
// use.
func NewHandler(next http.Handler, c *admit.Controller, opts ...HandlerOption) *Handler {
	h := &Handler{next: next}
	if h.next == nil {
		h.next = http.NotFoundHandler()
	}
	h.cfg.health = healthSet(defaultHealthPaths[:])
	for _, o := range opts {
		o(&h.cfg)
	}
	if mux, ok := next.(*http.ServeMux); ok && !h.cfg.routeSet {
		h.cfg.route = MuxRoute(mux)
	}
	if h.cfg.report == nil {
		h.cfg.report = logProblem(nil)
	}
	if h.cfg.now == nil {
		h.cfg.now = time.Now
	}
	if h.cfg.names == nil {
		h.cfg.names = &defaultNames
	}
	n := h.cfg.names
	h.keys = [inbound.NumKeys]string{
		inbound.Criticality: n.Criticality, inbound.Tenant: n.Tenant, inbound.Attempt: n.Attempt,
		inbound.TimeoutMs: n.TimeoutMs, inbound.GRPCTimeout: wire.GRPCTimeout, inbound.EnvoyTimeoutMs: wire.EnvoyTimeoutMs,
	}
	h.rules = inbound.Rules[request]{Header: h.header, Peer: h.peerTenant}
	if f := h.cfg.trust; f != nil {
		h.rules.Trust = func(q request) bool { return f(q.Request) }
	}
	if f := h.cfg.tenant; f != nil {
		h.rules.Tenant = func(q request) string { return f(q.Request) }
	}
	if h.cfg.classify != nil {
		h.rules.Untrusted = func(q request, asked levee.Criticality, has bool) (levee.Criticality, string) {
			return q.class.For(asked, has), q.class.Tenant
		}
	}
	h.done = func(t *admit.Ticket, err error) { t.Done(err) }
	h.unfedConc = unfed(c, &h.cfg)
	if c != nil {
		h.admit = c.Admit
		h.load = c.Load
		h.count = c.CountRejected
	} else {
		h.admit = func(context.Context) (admit.Ticket, error) { return admit.Ticket{}, nil }
		h.load = func() float64 { return 0 }
		h.count = func(levee.Criticality, levee.Reason) {}
	}
	return h
}

// Unwrap returns the next handler.
func (h *Handler) Unwrap() http.Handler { return h.next }

// probe reports whether r is a health or readiness probe (see
// WithHealthPaths).
func (h *Handler) probe(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && h.cfg.health(r.URL.Path)
}

// Probes returns the number of health and readiness requests the Handler
// passed to the next handler without admission (see WithHealthPaths),
// since NewHandler: for metrics (leveeprom.NewProbeCollector). Safe for
// concurrent use.
func (h *Handler) Probes() uint64 { return h.probes.Load() }

var errServerError = errors.New("leveehttp: handler answered with a status ≥ 500")

// errCallerGone is the answer to a request whose caller has gone: never
// modified.
var errCallerGone = inbound.DeadlineNoRetry

// header returns r's values of the levee header k.
func (h *Handler) header(q request, k inbound.Key) []string { return q.Header[h.keys[k]] }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := h.cfg.now()
	arrival, conn := arrivalOf(r, now) // also for probes: it sets the connection up for the next request
	if !h.checked.Load() {
		h.check(r, conn)
	}
	if h.cfg.loadHeader != nil && h.cfg.loadHeader() {
		w.Header()[h.cfg.names.Load] = h.loadHeader()
	}
	if h.probe(r) {
		h.probes.Add(1)
		h.next.ServeHTTP(w, r)
		conn.done()
		return
	}
	if h.cfg.queue != nil {
		h.cfg.queue.Observe(now.Sub(arrival))
	}
	ctx := r.Context()
	q := request{Request: r}
	if h.cfg.classify != nil {
		q.class = h.cfg.classify(r)
	}
	in, err := h.rules.Derive(q, arrival, now)
	if err == nil && ctx.Err() != nil {
		err = errCallerGone
	}
	if err != nil {
		// Answered here, before admission: counted where every other
		// rejection is (Snapshot.Rejected, metrics, status page).
		h.count(in.Call.Criticality, levee.Deadline)
		h.reject(w, r, err)
		return
	}
	if o := h.cfg.overload; o != nil {
		// The overload manager's gate, before the request costs anything
		// more (its context, admission): counted by o's counter.
		if rej := o.Check(r, in.Call.Criticality, now); rej != nil {
			h.reject(w, r, rej)
			return
		}
		defer o.Done()
	}
	ctx = levee.WithCall(ctx, in.Call)
	if bctx, cancel := inbound.Bound(ctx, in.Deadline); cancel != nil {
		ctx = bctx
		defer cancel()
	}

	// The state is the context of the request from here on. With a route
	// name it exists before admission, so that the controller's route
	// function (Route) finds the name; otherwise only admitted requests
	// pay for it.
	var st *state
	route := q.class.Route
	if route == "" && h.cfg.route != nil {
		route = h.cfg.route(r)
	}
	if route != "" {
		st = h.newState(ctx, w, conn, route)
		ctx = st
	}
	ticket, err := h.admit(ctx)
	if err == nil {
		// The run queue: wait here, parked and in order, while the
		// requests already running fill the bound.
		err = ticket.Wait(ctx)
	}
	if err != nil {
		h.reject(w, r, err)
		return
	}
	if st == nil {
		st = h.newState(ctx, w, conn, "")
		ctx = st
	}
	st.ticket = ticket
	if l := ticket.DegradeLevel(); l > 0 {
		ctx = degrade.WithLevel(ctx, l)
	}
	r2 := r.WithContext(ctx)
	st.watchBody(r2)
	if c := h.cfg.conc; c != nil {
		st.startInHandler(c, r2)
	}
	defer func() {
		if !st.finished {
			// next panicked: report a failure and let net/http recover.
			st.endInHandler()
			h.done(&st.ticket, errServerError)
		}
	}()
	h.next.ServeHTTP(&st.rw, r2)
	st.finished = true
	st.endInHandler()
	conn.done()
	h.done(&st.ticket, st.outcome())
}

func (h *Handler) newState(parent context.Context, w http.ResponseWriter, conn *stampConn, route string) *state {
	st := &state{h: h, parent: parent, conn: conn, route: route}
	st.rw.st = st
	st.rw.w = w
	return st
}

// Route returns the route name of the request ctx belongs to, as the
// Handler serving it found it: the name of the route rule it matched
// (WithRouter), else WithRoute's answer, by default the http.ServeMux
// pattern when next is a ServeMux ("GET /items/{id}"); "" when it has
// none. Give it to the admission controller, admit.WithRoute(leveehttp.Route),
// so that service time is learned per route (Protect does). It does not
// allocate.
func Route(ctx context.Context) string {
	if s := stateFrom(ctx); s != nil {
		return s.route
	}
	return ""
}

// reject writes err (a *levee.RejectedError, or anything else as a generic
// overload) without reading the request's body.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, err error) {
	rej := asRejected(err)
	if rej == nil {
		rej = errOverloadedNoRetry
	}
	h.write(w, r, rej)
}

// write answers r with rej, through the Responder if there is one.
func (h *Handler) write(w http.ResponseWriter, r *http.Request, rej *levee.RejectedError) {
	if h.cfg.respond == nil {
		writeRejection(w, rej, h.uniform, h.cfg.names)
		return
	}
	respond(w, r, rej, h.cfg.respond, h.uniform, h.cfg.names)
}

func (h *Handler) uniform() float64 { return inbound.Uniform(h.cfg.rand) }

func (h *Handler) loadHeader() []string {
	v := h.load()
	if math.IsNaN(v) {
		v = 0
	}
	if c := h.loadCache.Load(); c != nil && c.v == v {
		return c.s
	}
	var b [32]byte
	c := &loadValue{v: v, s: []string{string(wire.AppendLoad(b[:0], v))}}
	h.loadCache.Store(c)
	return c.s
}

// state is one admitted request's bookkeeping, allocated once: it is both
// the context handed to next (answering stateKey) and, through rw, the
// ResponseWriter.
type state struct {
	h      *Handler
	parent context.Context
	conn   *stampConn // nil without Listener
	route  string     // see Route
	// inHandler is the request's time in the handler for the concurrency
	// signal (WithConcurrency); see startInHandler.
	inHandler inHandler
	rw        recorder
	ticket    admit.Ticket
	body      serviceBody
	wrote     atomic.Bool // the response has begun: service time starts no later
	finished  bool
	// explicit is the error given to Error, if any.
	explicit error
	// downstream is the first levee rejection a Transport got for a call made
	// with this request's context.
	downstream atomic.Pointer[levee.RejectedError]
}

type stateKey struct{}

func (s *state) Deadline() (time.Time, bool) { return s.parent.Deadline() }
func (s *state) Done() <-chan struct{}       { return s.parent.Done() }
func (s *state) Err() error                  { return s.parent.Err() }
func (s *state) String() string              { return "leveehttp.requestContext" }
func (s *state) Value(key any) any {
	switch {
	case key == (stateKey{}):
		return s
	case key == levee.PauserKey() && s.inHandler.c != nil:
		return &s.inHandler
	}
	return s.parent.Value(key)
}

// stateFrom returns the state of the levee Handler serving ctx's request.
func stateFrom(ctx context.Context) *state {
	s, _ := ctx.Value(stateKey{}).(*state)
	return s
}

func (s *state) outcome() error {
	if s.explicit != nil {
		return s.explicit
	}
	if s.rw.status >= 500 {
		if d := s.downstream.Load(); d != nil {
			return d
		}
		return errServerError
	}
	if err := s.parent.Err(); err != nil {
		return err
	}
	return nil
}

// recorder watches the status next writes. When next answers ≥ 500 after a
// downstream levee rejection, it answers with the mid-tier mapping instead.
type recorder struct {
	st     *state
	w      http.ResponseWriter
	status int
}

func (rw *recorder) Header() http.Header { return rw.w.Header() }

func (rw *recorder) WriteHeader(code int) {
	if rw.status == 0 && code >= 200 {
		rw.st.wrote.Store(true)
		if code >= 500 && rw.st.explicit == nil {
			if d := rw.st.downstream.Load(); d != nil {
				if m := MidTier(d); m != nil {
					code = rejectionStatus(m.Reason)
					setRejectionHeaders(rw.w.Header(), m, rw.st.h.uniform, rw.st.h.cfg.names)
				}
			}
		}
		rw.status = code
	}
	rw.w.WriteHeader(code)
}

func (rw *recorder) Write(p []byte) (int, error) {
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	return rw.w.Write(p)
}

// Unwrap returns the underlying ResponseWriter for http.ResponseController.
func (rw *recorder) Unwrap() http.ResponseWriter { return rw.w }

// Flush implements http.Flusher when the underlying writer can flush. A
// response flushed before the handler returns is a stream (or a long
// poll): its length is its caller's, not service time.
func (rw *recorder) Flush() {
	rw.st.streamed()
	if rw.status == 0 {
		rw.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(rw.w).Flush()
}

// Hijack implements http.Hijacker when the underlying writer can hijack.
// A hijacked connection carries no more HTTP/1 requests: its arrival
// stamps are turned off; its length is no service time.
func (rw *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	rw.st.conn.stop()
	rw.st.streamed()
	return http.NewResponseController(rw.w).Hijack()
}
