package leveegrpc

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/inbound"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
)

// Server applies admission control to a gRPC server: install its InHandle
// (the cheapest rejection, before the request is decoded), its interceptors,
// or both; each request is admitted exactly once. Build it with NewServer;
// it is safe for concurrent use.
type Server struct {
	c        *admit.Controller
	rand     func() uint64
	trust    func(ctx context.Context) bool
	tenant   func(ctx context.Context) string
	exempt   func(method string) bool
	load     bool
	queue    QueueObserver
	conc     *pressure.Concurrency
	gate     *overload.Manager
	report   func(problem, detail string)
	checked  atomic.Bool // the first call was checked for misuse
	inflight atomic.Int64
	probes   atomic.Uint64
	rules    inbound.Rules[request]
	peers    inbound.Peers
	reaper   reaper
}

// request is what the call derivation (internal/inbound) reads of a gRPC
// request: its context (for the trust and tenant functions and the peer)
// and, in the tap, the raw header metadata.
type request struct {
	ctx context.Context
	md  metadata.MD // nil: the context's incoming metadata
}

// mdKeys are the metadata keys of the headers the derivation reads.
// grpc-timeout is absent: grpc-go consumes it into the stream context's
// deadline, which the derived deadline can only shorten.
var mdKeys = [inbound.NumKeys]string{
	inbound.Criticality:    wire.MdCriticality,
	inbound.Tenant:         wire.MdTenant,
	inbound.Attempt:        wire.MdAttempt,
	inbound.TimeoutMs:      wire.MdTimeoutMs,
	inbound.EnvoyTimeoutMs: wire.MdEnvoyTimeoutMs,
}

func header(r request, k inbound.Key) []string {
	key := mdKeys[k]
	switch {
	case key == "":
		return nil
	case r.md != nil:
		return r.md[key]
	}
	return metadata.ValueFromIncomingContext(r.ctx, key)
}

// Option configures a Server.
type Option func(*Server)

// WithTrust sets the function that says whether the caller of a request may
// be believed about its criticality and tenant. ctx carries the caller's
// peer (peer.FromContext) and incoming metadata; the function runs on the
// connection's reader goroutine when called from InHandle, so it must be
// quick and must not block. Default: nobody is trusted. An untrusted caller
// may lower its criticality but never raise it above CRITICAL, and its
// levee-tenant metadata is ignored. A nil f restores the default.
func WithTrust(f func(ctx context.Context) bool) Option {
	return func(s *Server) { s.trust = f }
}

// WithTenant sets the function that names the tenant of an untrusted caller,
// typically from its authentication (peer.AuthInfo, a verified token).
// Returning "" falls back to the default: the caller's network prefix (/24
// for IPv4, /64 for IPv6, "unknown" for non-IP transports), so a caller
// rotating ids buys nothing. Ids longer than 64 bytes or not printable ASCII
// are hashed, ids with control characters fall back to the default (as in
// leveehttp). The same rules as WithTrust apply: quick, non-blocking. A nil
// f restores the default.
func WithTenant(f func(ctx context.Context) string) Option {
	return func(s *Server) { s.tenant = f }
}

// WithExempt sets the function that says which methods (full names,
// "/package.Service/Method") are never shed: they are not admitted at all,
// only given their levee.Call. Default: the gRPC health service
// ("/grpc.health.v1.Health/"), so that "overloaded" never fails a liveness
// or readiness probe. A nil f exempts nothing.
func WithExempt(f func(method string) bool) Option {
	return func(s *Server) {
		if f == nil {
			f = func(string) bool { return false }
		}
		s.exempt = f
	}
}

// WithLoadReport makes the interceptors send the trailer levee-load with the
// controller's Load (max over signals of value ÷ target, 1.0 = at target)
// on every response, for load balancers. Default off: it costs a trailer per
// call.
func WithLoadReport(on bool) Option {
	return func(s *Server) { s.load = on }
}

// WithRand sets the random source that jitters the retry delay of
// rejections (±25%, so that callers rejected together do not come back
// together), for deterministic tests. It must be safe for concurrent use.
// Default (or nil): math/rand/v2's runtime source.
func WithRand(f func() uint64) Option {
	return func(s *Server) { s.rand = f }
}

// QueueObserver receives each call's wait between its arrival and the
// start of its handler's goroutine. *pressure.QueueDelay implements it.
// Observe must be safe for concurrent use and should not allocate.
type QueueObserver interface {
	Observe(d time.Duration)
}

// WithQueueDelay feeds q with each call's queueing delay: the time from
// the tap's entry (InHandle runs when the call's headers have been read,
// on the connection's reader) to the start of the goroutine gRPC runs the
// call on, which the stats handler (StatsHandler, installed by
// ServerOptions) sees. Under CPU overload that is where a gRPC server's
// queue is: new streams wait for a core behind everything already
// running. Neither end depends on the caller: a client that sends its
// message slowly after its headers makes itself late, never the signal
// high. Calls the tap did not see (no InHandle installed) and exempt
// methods are not observed. Default: none.
func WithQueueDelay(q QueueObserver) Option {
	return func(s *Server) { s.queue = q }
}

// WithOverload puts the overload manager m's request gate before
// admission (overload.Manager.Enter): in InHandle, or in the interceptors
// for calls the tap did not see. A call it refuses ends UNAVAILABLE
// (overloaded, with its pushback of about a second) before admission, and
// is counted in the controller (CountRejected); exempt methods (health
// checks) never reach it and CRITICAL_PLUS calls always pass it. So the
// manager's in-flight cap and its last level (only CRITICAL_PLUS) hold
// for gRPC as for HTTP; its shed floor needs nothing here (it is the
// controller's). A call it lets through counts as in flight until its
// ticket is released: a unary call's handler returns, a stream's handler
// first receives or sends (as its run slot, see StreamServerInterceptor).
// A call's size is not declared before its message, so the LargeBodies
// action does not apply (grpc.MaxRecvMsgSize bounds it); keep-alive and
// timeouts are the HTTP server's actions. It needs a controller (NewServer
// with c); Enter and Exit do not allocate. Default: none; Protect sets
// leveehttp.Protect's manager.
func WithOverload(m *overload.Manager) Option {
	return func(s *Server) { s.gate = m }
}

// enterGate asks the overload gate about a call of criticality c: nil
// when it may go on (or there is no gate), else the status error to end
// it with, counted in the controller.
func (s *Server) enterGate(c levee.Criticality) *levee.RejectedError {
	if s.gate == nil {
		return nil
	}
	v := s.gate.Enter(c, 0)
	if v == overload.Pass {
		return nil
	}
	s.c.CountRejected(c, levee.Overloaded)
	return v.Err()
}

// exitGate ends a call the overload gate let through.
func (s *Server) exitGate() {
	if s.gate != nil {
		s.gate.Exit()
	}
}

// WithProblemReporter sets the function told once about misuse the Server
// detects on its first call: ProblemNoTap (the interceptors run but
// InHandle is not installed), ProblemNoStatsHandler (WithQueueDelay is
// set but the stats handler is not installed) or ProblemUnfedConcurrency
// (the controller's concurrency signal is not fed). Default: a warning in
// slog.Default's log. Protect reports to its own log and metric.
func WithProblemReporter(f func(problem, detail string)) Option {
	return func(s *Server) { s.report = f }
}

// Problems a Server reports (see WithProblemReporter).
const (
	// ProblemNoTap: calls reach the interceptors without InHandle:
	// rejections cost a decoded message and the queue-delay signal sees
	// nothing.
	ProblemNoTap = "no_tap"
	// ProblemNoStatsHandler: WithQueueDelay is set but StatsHandler is not
	// installed (grpc.StatsHandler): the queue-delay signal sees nothing.
	ProblemNoStatsHandler = "no_stats_handler"
	// ProblemUnfedConcurrency: the controller steers by a concurrency
	// signal (pressure.Default holds one) that the Server does not feed:
	// it reads 0 whatever waits inside the handlers, so a dependency that
	// slows is invisible. Pass WithConcurrency(set.Concurrency), as
	// Protect does.
	ProblemUnfedConcurrency = "unfed_concurrency"
)

// DefaultRetryAfter is the delay a Server advises with an overload or quota
// rejection whose controller gave none: levee's one default, shared with
// leveehttp.
const DefaultRetryAfter = inbound.DefaultRetryAfter

// HealthPrefix is the method prefix of the gRPC health service, exempt from
// admission by default.
const HealthPrefix = "/grpc.health.v1.Health/"

func isHealth(method string) bool { return strings.HasPrefix(method, HealthPrefix) }

// NewServer returns a Server admitting requests through c. A nil c admits
// everything (the levee.Call and the caller's deadline are still read from
// the metadata and carried in the context, and a spent budget is still
// answered DEADLINE_EXCEEDED).
func NewServer(c *admit.Controller, opts ...Option) *Server {
	s := &Server{c: c, exempt: isHealth}
	for _, o := range opts {
		o(s)
	}
	if s.report == nil {
		s.report = func(problem, detail string) { slog.Warn("leveegrpc: "+detail, "problem", problem) }
	}
	s.rules = inbound.Rules[request]{Header: header, Peer: s.peerTenant}
	if f := s.trust; f != nil {
		s.rules.Trust = func(r request) bool { return f(r.ctx) }
	}
	if f := s.tenant; f != nil {
		s.rules.Tenant = func(r request) string { return f(r.ctx) }
	}
	return s
}

// ServerOptions returns the options that install s completely:
// grpc.InTapHandle(s.InHandle), the unary and stream interceptors,
// chained (grpc.ChainUnaryInterceptor, grpc.ChainStreamInterceptor), so
// that other interceptors can be added with their own chain options
// (interceptors run in the order of the options), and, with WithQueueDelay,
// grpc.StatsHandler(s.StatsHandler()). A server has one tap:
// grpc.NewServer panics if another grpc.InTapHandle is given as well.
func (s *Server) ServerOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.InTapHandle(s.InHandle),
		grpc.ChainUnaryInterceptor(s.UnaryServerInterceptor),
		grpc.ChainStreamInterceptor(s.StreamServerInterceptor),
	}
	if s.queue != nil {
		opts = append(opts, grpc.StatsHandler(s.StatsHandler()))
	}
	return opts
}

// Probes returns the number of calls to exempt methods (WithExempt: the
// health service by default) the Server passed through without admission,
// since NewServer, for metrics (leveeprom.NewProbeCollector), each once
// whichever parts are installed. Safe for concurrent use.
func (s *Server) Probes() uint64 { return s.probes.Load() }

// InFlight returns the number of requests admitted whose ticket has not yet
// been released: for status pages and for tests that check that nothing
// leaks.
func (s *Server) InFlight() int64 { return s.inflight.Load() }

// ticket is a ticket taken by InHandle. The tap's context (an admitted
// node) points to it, which is how the interceptors find it: the
// interceptor that does releases the ticket when the handler returns. If no
// interceptor runs (none installed, unknown method, a unary message that
// never arrived, a stream aborted before its handler) the Server's reaper
// releases it once gRPC has closed the stream context's Done channel, which
// it does whenever a stream ends. A ticket holds that channel, not the
// context, so that the reaper keeps no stream's context graph alive.
type ticket struct {
	s      *Server
	t      admit.Ticket
	state  atomic.Int32 // tapHeld, claimed or released
	done   <-chan struct{}
	next   *ticket        // reaper lists
	cs     pressure.Start // in the handler, for WithConcurrency
	stream bool           // a stream's: dropped from the concurrency signal
	pauses pressure.Pauses
}

// Pause takes the call out of the concurrency signal's count while a
// client call made with its context waits between attempts
// (levee.Pauser).
func (t *ticket) Pause() { t.pauses.Pause(t.s.conc) }

// Unpause ends a Pause.
func (t *ticket) Unpause() { t.pauses.Unpause(t.s.conc) }

// A ticket's owner: the tap's (the reaper may release it), an
// interceptor's (only the interceptor touches it), or nobody (released).
const (
	tapHeld int32 = iota
	claimed
	released
)

// claim makes the calling interceptor the ticket's owner: false when the
// reaper released it already (the stream ended).
func (t *ticket) claim() bool { return t.state.CompareAndSwap(tapHeld, claimed) }

// release ends the ticket with err, once, whoever owns it.
func (t *ticket) release(err error) {
	if t.state.Swap(released) != released {
		t.s.endInHandler(t.cs, t.stream, &t.pauses)
		t.t.Done(err)
		t.s.inflight.Add(-1)
		t.s.exitGate()
	}
}

// reap releases the ticket as "caller gone" if it is still the tap's.
func (t *ticket) reap() bool {
	if t.state.CompareAndSwap(tapHeld, released) {
		t.t.Done(context.Canceled)
		t.s.inflight.Add(-1)
		t.s.exitGate()
		return true
	}
	return t.state.Load() != tapHeld
}

// admitted is the context node InHandle builds: the method (for Method,
// before gRPC puts it in the context) and, once admitted, the ticket. It
// answers admittedKey with itself.
type admitted struct {
	context.Context
	method  string
	t       *ticket
	arrival time.Time // the tap's entry; zero without WithQueueDelay
	tagged  atomic.Bool
}

type admittedKey struct{}

func (a *admitted) Value(key any) any {
	switch {
	case key == (admittedKey{}):
		return a
	case key == levee.PauserKey() && a.t != nil && a.t.s.conc != nil:
		return a.t
	}
	return a.Context.Value(key)
}

// tapped returns the node InHandle built for ctx's request, or nil when
// the tap did not see it.
func tapped(ctx context.Context) *admitted {
	a, _ := ctx.Value(admittedKey{}).(*admitted)
	return a
}

// tapTicket returns the ticket InHandle took for ctx's request, or nil.
func tapTicket(ctx context.Context) *ticket {
	if a := tapped(ctx); a != nil {
		return a.t
	}
	return nil
}

// Method returns the full name ("/package.Service/Method") of the gRPC
// method that ctx's request calls, "" if ctx belongs to no gRPC request. It
// works in InHandle (where gRPC has not yet put the method in the context),
// in interceptors and in handlers, and does not allocate. Use it as the
// admission controller's route, admit.WithRoute(leveegrpc.Method), so that
// service time is learned per method.
func Method(ctx context.Context) string {
	if a, ok := ctx.Value(admittedKey{}).(*admitted); ok {
		return a.method
	}
	m, _ := grpc.Method(ctx)
	return m
}

// errStreamEnded is what a stream's ticket is released with when its
// handler succeeded: a stream lives as long as its caller wants (a watch
// may last hours), so its duration must not become the service time that
// admit compares deadlines with. admit learns nothing from an error that is
// neither a rejection nor a context error.
var errStreamEnded = errors.New("leveegrpc: stream ended")

func streamOutcome(err error) error {
	if err == nil {
		return errStreamEnded
	}
	return err
}

// reapPeriod is how often the reaper looks for tap tickets whose stream
// ended without an interceptor releasing them.
const reapPeriod = 100 * time.Millisecond

// reaper releases the tickets of streams that ended without reaching an
// interceptor. The tap pushes every ticket it takes on a lock-free stack (a
// compare-and-swap: cheaper than a context.AfterFunc per request, which
// costs a registration in the stream context's children and five
// allocations); a goroutine, running only while tickets are outstanding,
// moves them to its own list every reapPeriod, drops those released, and
// releases (as "caller gone") those whose stream has ended.
type reaper struct {
	head    atomic.Pointer[ticket]
	running atomic.Bool
}

func (r *reaper) add(t *ticket) {
	for {
		old := r.head.Load()
		t.next = old
		if r.head.CompareAndSwap(old, t) {
			break
		}
	}
	if !r.running.Load() && r.running.CompareAndSwap(false, true) {
		go r.run()
	}
}

func (r *reaper) run() {
	var pending *ticket // the reaper's own list, linked through next
	tk := time.NewTicker(reapPeriod)
	defer tk.Stop()
	for range tk.C {
		// Move the new tickets to the front of the own list.
		if fresh := r.head.Swap(nil); fresh != nil {
			last := fresh
			for last.next != nil {
				last = last.next
			}
			last.next = pending
			pending = fresh
		}
		// Keep only the outstanding ones.
		link := &pending
		for t := *link; t != nil; t = *link {
			gone := t.state.Load() != tapHeld // an interceptor's, or released
			if !gone {
				select {
				case <-t.done:
					gone = t.reap()
				default:
				}
			}
			if gone {
				*link, t.next = t.next, nil
			} else {
				link = &t.next
			}
		}
		if pending == nil {
			r.running.Store(false)
			// A ticket pushed after the Swap saw running set and started
			// nothing: take over again unless another goroutine did.
			if r.head.Load() == nil || !r.running.CompareAndSwap(false, true) {
				return
			}
		}
	}
}

// InHandle is a tap.ServerInHandle (install it with grpc.InTapHandle): it
// admits the request from its headers alone, before gRPC creates the stream
// and decodes any message. A rejection ends the stream with the status of
// Status (no trailers: a tap cannot send them, so the delay and "no-retry"
// travel in the status details only; grpc-go's built-in retry does not read
// them, levee clients do).
//
// The context it returns carries the request's levee.Call, its
// degradation level, its method (see Method), the admitted ticket and,
// with WithQueueDelay, the call's arrival (the tap's entry, when its
// headers have been read); the interceptors make the call wait in the run
// queue and release the ticket when the handler returns. Without the
// interceptors the call skips the run queue, the reaper releases its
// ticket after the stream ended, as "caller gone" (the controller then
// learns neither the service time nor a downstream overload), and handler
// errors are not mapped (see Error).
func (s *Server) InHandle(ctx context.Context, info *tap.Info) (context.Context, error) {
	r := request{ctx: ctx, md: info.Header}
	if s.exempt(info.FullMethodName) {
		// Counted here; the interceptors see the node and count it no
		// more.
		s.probes.Add(1)
		return &admitted{Context: levee.WithCall(ctx, s.rules.Call(r)), method: info.FullMethodName}, nil
	}
	var now time.Time
	if s.queue != nil {
		now = time.Now() // the call's arrival
	}
	in, err := s.rules.Derive(r, now, now)
	if err != nil {
		s.c.CountRejected(in.Call.Criticality, levee.Deadline)
		return nil, rejectErr(asRejected(err))
	}
	done := ctx.Done() // the stream's: it closes when the stream ends
	ctx = levee.WithCall(ctx, in.Call)
	// The caller's budget shortens the stream's deadline. Nothing need
	// release the new context: gRPC cancels the stream's context, its
	// parent, whenever the stream ends, which stops its timer.
	ctx, _ = inbound.Bound(ctx, in.Deadline)
	a := &admitted{Context: ctx, method: info.FullMethodName, arrival: now}
	if s.c == nil {
		return a, nil
	}
	if rej := s.enterGate(in.Call.Criticality); rej != nil {
		return nil, rejectErr(s.advise(rej))
	}
	t, err := s.c.Admit(a)
	if err != nil {
		s.exitGate()
		return nil, rejectErr(s.advise(levee.AsRejected(err)))
	}
	s.inflight.Add(1)
	a.t = &ticket{s: s, t: t, done: done}
	s.reaper.add(a.t)
	if l := t.DegradeLevel(); l != 0 {
		return degrade.WithLevel(a, l), nil
	}
	return a, nil
}

// derive reads the call and deadline of a request the tap has not
// admitted, for the interceptors: the context to run its handler with (the
// caller's budget may shorten its deadline: release it when done), or the
// rejection of a request whose budget is spent, counted in the controller
// like its own.
func (s *Server) derive(ctx context.Context) (context.Context, context.CancelFunc, error) {
	in, err := s.rules.Derive(request{ctx: ctx}, time.Time{}, time.Time{})
	if err != nil {
		s.c.CountRejected(in.Call.Criticality, levee.Deadline)
		return ctx, nil, err
	}
	ctx = levee.WithCall(ctx, in.Call)
	bctx, cancel := inbound.Bound(ctx, in.Deadline)
	return bctx, cancel, nil
}

func asRejected(err error) *levee.RejectedError {
	if r, ok := err.(*levee.RejectedError); ok {
		return r
	}
	return levee.AsRejected(err)
}

// UnaryServerInterceptor is a grpc.UnaryServerInterceptor (install it with
// grpc.ChainUnaryInterceptor or grpc.UnaryInterceptor). It admits the
// request unless InHandle already did, waits in the controller's run queue
// (admit.Ticket.Wait) — a call InHandle admitted too: the tap runs on the
// connection's reader and must not block, so its calls wait here, before
// their handler — puts its levee.Call and degradation level in the
// handler's context, releases the ticket when the handler returns, and
// maps the handler's levee rejections (see Error), sending the
// grpc-retry-pushback-ms trailer with them and with a run-queue rejection.
// A call the tap admitted starts its service time here, once its message
// has arrived (admit.Ticket.Start): the upload is the caller's pace.
func (s *Server) UnaryServerInterceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	if !s.checked.Load() {
		s.check(ctx, info.FullMethod)
	}
	if tk := tapTicket(ctx); tk != nil {
		if err := s.hold(ctx, tk, nil); err != nil {
			return nil, err
		}
		defer func() { tk.release(err); err = s.finish(ctx, err, nil) }()
		return handler(ctx, req)
	}
	if s.exempt(info.FullMethod) {
		if tapped(ctx) == nil { // else the tap counted it and set its call
			s.probes.Add(1)
			ctx = levee.WithCall(ctx, s.rules.Call(request{ctx: ctx}))
		}
		resp, err = handler(ctx, req)
		return resp, s.finish(ctx, err, nil)
	}
	ctx, release, derr := s.derive(ctx)
	if derr != nil {
		return nil, rejectErr(asRejected(derr))
	}
	if release != nil {
		defer release()
	}
	if s.c == nil {
		resp, err = handler(ctx, req)
		return resp, s.finish(ctx, err, nil)
	}
	if rej := s.enterGate(levee.CallFrom(ctx).Criticality); rej != nil {
		return nil, s.refuse(ctx, rej, nil)
	}
	t, aerr := s.c.Admit(ctx)
	if aerr == nil {
		// The run queue (admit.WithRunQueue): wait, parked and in order,
		// while the calls already running fill the bound.
		aerr = t.Wait(ctx)
	}
	if aerr != nil {
		s.exitGate()
		return nil, s.refuse(ctx, aerr, nil)
	}
	s.inflight.Add(1)
	if l := t.DegradeLevel(); l != 0 {
		ctx = degrade.WithLevel(ctx, l)
	}
	cs := s.startInHandler(ctx)
	var pc *pausableCall
	if s.conc != nil {
		pc = &pausableCall{Context: ctx, s: s}
		ctx = pc
	}
	defer func() {
		s.endInHandler(cs, false, pc.pausesOf())
		t.Done(err)
		s.inflight.Add(-1)
		s.exitGate()
		err = s.finish(ctx, err, nil)
	}()
	return handler(ctx, req)
}

// StreamServerInterceptor is a grpc.StreamServerInterceptor (install it with
// grpc.ChainStreamInterceptor or grpc.StreamInterceptor). It works as
// UnaryServerInterceptor does, except for what a stream holds: it waits in
// the run queue before its handler starts and holds its run slot and
// ticket only until the handler first receives or sends a message (see
// startingStream: a stream's life is its caller's choice), or returns. A
// stream's duration is not reported as service time
// (admit.Ticket.Exclude).
func (s *Server) StreamServerInterceptor(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	ctx := ss.Context()
	if !s.checked.Load() {
		s.check(ctx, info.FullMethod)
	}
	if tk := tapTicket(ctx); tk != nil {
		if err := s.hold(ctx, tk, ss); err != nil {
			return err
		}
		defer func() { tk.release(streamOutcome(err)); err = s.finish(ctx, err, ss) }()
		return handler(srv, &startingStream{ServerStream: ss, ctx: ctx, t: tk})
	}
	if s.exempt(info.FullMethod) {
		if tapped(ctx) != nil { // the tap counted it and set its call
			return s.finish(ctx, handler(srv, ss), ss)
		}
		s.probes.Add(1)
		ctx = levee.WithCall(ctx, s.rules.Call(request{ctx: ctx}))
		return s.finish(ctx, handler(srv, &serverStream{ServerStream: ss, ctx: ctx}), ss)
	}
	ctx, release, derr := s.derive(ctx)
	if derr != nil {
		return rejectErr(asRejected(derr))
	}
	if release != nil {
		defer release()
	}
	ws := &serverStream{ServerStream: ss, ctx: ctx}
	if s.c == nil {
		return s.finish(ctx, handler(srv, ws), ss)
	}
	if rej := s.enterGate(levee.CallFrom(ctx).Criticality); rej != nil {
		return s.refuse(ctx, rej, ss)
	}
	at, aerr := s.c.Admit(ctx)
	if aerr != nil {
		s.exitGate()
		return s.refuse(ctx, aerr, ss)
	}
	s.inflight.Add(1)
	tk := &ticket{s: s, t: at}
	tk.state.Store(claimed) // no reaper knows it
	if err := s.hold(ctx, tk, ss); err != nil {
		return err
	}
	if l := at.DegradeLevel(); l != 0 {
		ws.ctx = degrade.WithLevel(ctx, l)
	}
	defer func() {
		tk.release(streamOutcome(err))
		err = s.finish(ctx, err, ss)
	}()
	return handler(srv, &startingStream{ServerStream: ws, ctx: ws.ctx, t: tk})
}

// hold makes the interceptor the owner of tk and waits in the run queue
// (admit.Ticket.Wait) until the call may start. It returns the status
// error to end the call with, the rejection's pushback trailer set on ss
// (nil for unary calls), when the call must not start: the stream ended
// before its handler (the reaper released the ticket), or the run queue
// refused it.
func (s *Server) hold(ctx context.Context, tk *ticket, ss grpc.ServerStream) error {
	if tk.state.Load() != claimed && !tk.claim() {
		return errEndedEarly
	}
	if err := tk.t.Wait(ctx); err != nil {
		tk.release(err)
		return s.refuse(ctx, err, ss)
	}
	if ss == nil {
		// Service starts now: the tap admitted the call before its
		// message arrived, and a slow sender's upload is not the
		// server's work (admit.WithRoute's service time).
		tk.t.Start()
	} else {
		tk.t.Exclude() // a stream's length is its caller's choice
	}
	tk.stream = ss != nil
	tk.cs = s.startInHandler(ctx)
	return nil
}

// WithConcurrency reports each admitted call's time in its handler to c,
// the concurrency signal (pressure.Concurrency), which sees calls waiting
// inside handlers (a dependency's pool, a lock): StartAt once the call
// leaves the run queue, with the time left to its deadline, DoneAt when a
// unary handler returns; a stream is dropped at its first message (its
// length is its caller's). A unary call's context carries a levee.Pauser:
// while a client call made with it waits between attempts (a backoff, a
// downstream's pushback) the call is out of the in-flight count, and the
// wait is not its time in the handler. Default: none; Protect sets its
// set's.
func WithConcurrency(c *pressure.Concurrency) Option {
	return func(s *Server) { s.conc = c }
}

// startInHandler starts a call's in-handler time (the zero Start without
// WithConcurrency).
func (s *Server) startInHandler(ctx context.Context) pressure.Start {
	if s.conc == nil {
		return pressure.Start{}
	}
	now := time.Now()
	var budget time.Duration
	if dl, ok := ctx.Deadline(); ok {
		budget = dl.Sub(now)
	}
	return s.conc.StartAt(now, budget)
}

// endInHandler ends it: DoneAt, or Drop for a stream. p holds its pauses
// (nil: none), which end with it.
func (s *Server) endInHandler(cs pressure.Start, stream bool, p *pressure.Pauses) {
	if s.conc == nil {
		return
	}
	now := time.Now()
	var paused time.Duration
	if p != nil {
		paused = p.End(s.conc, now)
	}
	if stream {
		s.conc.Drop(cs)
		return
	}
	s.conc.DoneAt(cs, now, paused)
}

// pausableCall is the context node of a unary call admitted without the
// tap, with WithConcurrency: it carries the call's pauses (levee.Pauser).
// One allocation per call; the tap's calls keep theirs in the ticket.
type pausableCall struct {
	context.Context
	s      *Server
	pauses pressure.Pauses
}

func (p *pausableCall) Value(key any) any {
	if key == levee.PauserKey() {
		return p
	}
	return p.Context.Value(key)
}

func (p *pausableCall) Pause()   { p.pauses.Pause(p.s.conc) }
func (p *pausableCall) Unpause() { p.pauses.Unpause(p.s.conc) }

// pausesOf returns p's pauses, nil for a nil p.
func (p *pausableCall) pausesOf() *pressure.Pauses {
	if p == nil {
		return nil
	}
	return &p.pauses
}

var errEndedEarly = status.Error(codes.Canceled, "leveegrpc: the call ended before its handler started")

// refuse returns the status error for err, an admission or run-queue
// rejection, with its pushback trailer set (on ss for streams).
func (s *Server) refuse(ctx context.Context, err error, ss grpc.ServerStream) error {
	rej := s.advise(levee.AsRejected(err))
	if md := Pushback(rej); md != nil {
		if ss != nil {
			ss.SetTrailer(md)
		} else {
			_ = grpc.SetTrailer(ctx, md)
		}
	}
	return rejectErr(rej)
}

// startingStream releases its stream's ticket, and with it the run slot,
// when the handler first receives or sends a message: a stream holds a
// slot only while it starts. From its first message on its pace is its
// caller's (a watch may idle for hours), and slots held for a stream's
// whole life would let a few long streams fill the bound and starve the
// unary calls. So the run queue bounds and orders stream openings and the
// work a handler does before its first message; work between messages is
// not bounded. The ticket is released as an outcome admit learns nothing
// from (a stream's length is no service time), so a downstream overload a
// stream's handler meets after its first message is not counted.
type startingStream struct {
	grpc.ServerStream
	ctx context.Context
	t   *ticket
}

func (w *startingStream) Context() context.Context { return w.ctx }

func (w *startingStream) RecvMsg(m any) error {
	w.t.release(errStreamEnded)
	return w.ServerStream.RecvMsg(m)
}

func (w *startingStream) SendMsg(m any) error {
	w.t.release(errStreamEnded)
	return w.ServerStream.SendMsg(m)
}

// serverStream gives the handler the context carrying the levee.Call.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *serverStream) Context() context.Context { return w.ctx }

// finish maps the handler's error (the mid-tier mapping) and adds the
// trailers: the pushback of a mapped rejection and, if enabled, the load.
// ss is nil for unary calls.
func (s *Server) finish(ctx context.Context, err error, ss grpc.ServerStream) error {
	var md metadata.MD
	if err != nil {
		if rej := levee.AsRejected(err); rej != nil {
			up := s.advise(upward(rej))
			md = Pushback(up)
			err = rejectErr(up)
		}
	}
	if s.load && s.c != nil {
		var b [24]byte
		lv := string(wire.AppendLoad(b[:0], s.c.Load()))
		if md == nil {
			md = metadata.MD{}
		}
		md[wire.MdLoad] = []string{lv}
	}
	if md != nil {
		if ss != nil {
			ss.SetTrailer(md)
		} else {
			_ = grpc.SetTrailer(ctx, md)
		}
	}
	return err
}

// advise returns the rejection to send for rej: for overload and quota
// rejections that may be retried, the delay (DefaultRetryAfter when rej
// gives none) jittered uniformly over ±25% (inbound.Delay). A nil rej
// (admit returned some other error) is sent as overloaded; no-retry.
func (s *Server) advise(rej *levee.RejectedError) *levee.RejectedError {
	if rej == nil {
		return overloadedNoRetry
	}
	if rej.NoRetry || (rej.Reason != levee.Overloaded && rej.Reason != levee.Quota) {
		return rej
	}
	return &levee.RejectedError{Reason: rej.Reason, RetryAfter: inbound.Delay(rej.RetryAfter, inbound.Uniform(s.rand))}
}

// peerTenant is the network prefix of the caller's address, from the
// Server's cache so that the accept path does not allocate a string per
// request, and the address. Addresses that are not IP (Unix sockets,
// in-memory transports) give "unknown" and the zero Addr.
func (s *Server) peerTenant(r request) (string, netip.Addr) {
	p, ok := peer.FromContext(r.ctx)
	if !ok {
		return inbound.Unknown, netip.Addr{}
	}
	a := inbound.NetAddr(p.Addr)
	return s.peers.Tenant(a), a
}
