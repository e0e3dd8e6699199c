package leveehttp

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/inbound"
	"github.com/levee-dev/levee/overload"
)

// Overload applies an overload.Manager's actions to an HTTP server:
//
//   - the request gate (the InFlight cap, LargeBodies, CriticalOnly), before
//     admission: a refused request is answered 503 "overloaded" with
//     Retry-After, without reading its body, and counted with
//     WithOverloadCounter; health probes never reach the gate and
//     CRITICAL_PLUS requests always pass it;
//   - KeepAlive, through the server's SetKeepAlivesEnabled (race-free: the
//     server reads it atomically): new responses close their connection
//     and idle connections are closed at once;
//   - Timeouts, through the connections of Listener: while the action is
//     active a connection waits at most the short idle timeout for a
//     request's first byte and the short header timeout for the rest of
//     its head, however the server is configured, and connections already
//     waiting get the short deadline at once (the http.Server's fields
//     are never written);
//   - descriptors: when Accept fails because the process is out of them
//     (EMFILE, ENFILE), the idle connections and those stuck in a request
//     head for over a second are closed and the accept is tried again at
//     once, so that the connection waiting, a health probe's perhaps, is
//     taken before net/http backs off. Connections are never refused.
//
// Wiring (leveehttp.Protect does it; by hand):
//
//	m := overload.New(overload.WithResources(overload.Resources(set)...), overload.WithShedder(ctl))
//	go m.Run(ctx)
//	srv := &http.Server{ConnContext: leveehttp.ConnContext}
//	o := leveehttp.NewOverload(m, leveehttp.WithOverloadServer(srv), leveehttp.WithOverloadCounter(ctl.CountRejected))
//	srv.Handler = leveehttp.NewHandler(h, ctl, leveehttp.WithOverload(o)) // or o.Wrap(h) without a Handler
//	srv.ConnState = o.ConnState
//	srv.Serve(leveehttp.Listener(o.Listener(ln)))
//
// Listener's connections must be inside leveehttp.Listener's (as above)
// so that arrival stamps keep working. Safe for concurrent use.
type Overload struct {
	m     *overload.Manager
	cfg   overloadConfig
	rules inbound.Rules[*http.Request]

	st      atomic.Pointer[overload.State] // the latest step's state, nil before the first
	keepOff atomic.Bool                    // keep-alive turned off by this Overload

	mu        sync.Mutex
	conns     map[*overloadConn]struct{}
	timeouts  bool      // the Timeouts action as last applied to the connections
	lastClose time.Time // the last time idle connections were closed for descriptors
}

// OverloadOption configures NewOverload.
type OverloadOption func(*overloadConfig)

type overloadConfig struct {
	srv    *http.Server
	count  func(levee.Criticality, levee.Reason)
	trust  func(*http.Request) bool
	health func(*http.Request) bool
	names  *HeaderNames
	now    func() time.Time
}

// WithOverloadServer sets the server whose keep-alive the KeepAlive action
// turns off (http.Server.SetKeepAlivesEnabled): the action owns that
// setting while the Overload lives. Default: none, and Wrap adds
// "Connection: close" to the responses it passes instead.
func WithOverloadServer(srv *http.Server) OverloadOption {
	return func(c *overloadConfig) { c.srv = srv }
}

// WithOverloadCounter sets the function told of each refusal, with the
// request's criticality and levee.Overloaded: admit.Controller's
// CountRejected, so that the status page and the metrics count them with
// the controller's. Default: none (the Manager counts them by verdict).
func WithOverloadCounter(f func(levee.Criticality, levee.Reason)) OverloadOption {
	return func(c *overloadConfig) { c.count = f }
}

// WithOverloadTrust and WithOverloadHealth give Wrap the rules a Handler
// has (WithTrust, WithHealthPaths): who may claim CRITICAL_PLUS, and which
// requests are health probes. Defaults: nobody is trusted; GET and HEAD
// on DefaultHealthPaths are probes. Check, called by a Handler, uses the
// Handler's own.
func WithOverloadTrust(f func(*http.Request) bool) OverloadOption {
	return func(c *overloadConfig) { c.trust = f }
}

// WithOverloadHealth: see WithOverloadTrust.
func WithOverloadHealth(f func(*http.Request) bool) OverloadOption {
	return func(c *overloadConfig) { c.health = f }
}

// WithOverloadHeaderNames renames the criticality header Wrap reads (see
// HeaderNames). Default: HeaderCriticality.
func WithOverloadHeaderNames(n HeaderNames) OverloadOption {
	return func(c *overloadConfig) { c.names = n.canonical() }
}

// NewOverload returns an Overload for m and attaches it to m (an
// overload.Effector): its actions apply from m's next step. A nil m
// panics.
func NewOverload(m *overload.Manager, opts ...OverloadOption) *Overload {
	if m == nil {
		panic("leveehttp: NewOverload with a nil manager")
	}
	o := &Overload{m: m, conns: map[*overloadConn]struct{}{}}
	for _, opt := range opts {
		if opt != nil {
			opt(&o.cfg)
		}
	}
	if o.cfg.names == nil {
		o.cfg.names = &defaultNames
	}
	if o.cfg.now == nil {
		o.cfg.now = time.Now
	}
	if o.cfg.health == nil {
		o.cfg.health = func(r *http.Request) bool {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				return false
			}
			for _, p := range defaultHealthPaths {
				if r.URL.Path == p {
					return true
				}
			}
			return false
		}
	}
	name := o.cfg.names.Criticality
	o.rules = inbound.Rules[*http.Request]{
		Header: func(r *http.Request, k inbound.Key) []string {
			if k != inbound.Criticality {
				return nil
			}
			return r.Header[name]
		},
		Trust: o.cfg.trust,
		Peer:  func(*http.Request) (string, netip.Addr) { return "", netip.Addr{} },
	}
	m.Attach(o)
	return o
}

// WithOverload puts o's request gate in the Handler (see Overload.Check):
// once a request's criticality and deadline are derived, before its
// context is built and before admission, so that a refusal costs neither;
// health probes never reach it. A refused request is answered as a
// rejection (503 overloaded, Retry-After about a second, through the
// Responder) and counted by o's counter (WithOverloadCounter: give it the
// controller's CountRejected, as Protect does); a request the gate lets
// through is ended in it when the Handler returns. It adds no allocation
// (BenchmarkHandler's accept-overload). Default: none.
func WithOverload(o *Overload) HandlerOption {
	return func(c *handlerConfig) { c.overload = o }
}

// Manager returns the Manager whose actions the Overload applies.
func (o *Overload) Manager() *overload.Manager { return o.m }

// Check is the request gate for a request of criticality c that is not a
// health probe, at now (the time the caller read; zero reads the clock
// only if an action concerns requests). It returns nil when the request
// may go on, and the caller then calls Done once it ends; otherwise the
// rejection to answer with (Reason Overloaded; shared, do not modify),
// after counting it (WithOverloadCounter). It reads the request's
// declared length (ContentLength: -1 when not declared), never its body.
// It does not allocate.
//
// A Handler calls it after deriving the request's criticality, before
// admission; Wrap calls it for any other handler.
func (o *Overload) Check(r *http.Request, c levee.Criticality, now time.Time) *levee.RejectedError {
	if o.keepOff.Load() {
		now = o.healKeepAlive(now)
	}
	var v overload.Verdict
	if now.IsZero() {
		v = o.m.Enter(c, r.ContentLength)
	} else {
		v = o.m.EnterAt(now, c, r.ContentLength)
	}
	if v == overload.Pass {
		return nil
	}
	if o.cfg.count != nil {
		o.cfg.count(c, levee.Overloaded)
	}
	return v.Err()
}

// Done ends a request Check let through.
func (o *Overload) Done() { o.m.Exit() }

// Wrap returns a handler that puts the gate in front of next: health
// probes (WithOverloadHealth) go straight to next; any other request's
// criticality is read as a Handler reads it (WithOverloadTrust: an
// untrusted caller may lower its level, never raise it above CRITICAL)
// and a refused one is answered 503 without calling next. While the
// KeepAlive action is active and no server was given, responses carry
// "Connection: close". Put it outside the levee Handler, so that a
// refusal costs no admission. The caller's request is never modified.
func (o *Overload) Wrap(next http.Handler) http.Handler {
	if next == nil {
		next = http.NotFoundHandler()
	}
	return &overloadHandler{o: o, next: next}
}

type overloadHandler struct {
	o    *Overload
	next http.Handler
}

var connectionClose = []string{"close"}

func (h *overloadHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := h.o
	if o.cfg.srv == nil && o.keepOff.Load() {
		w.Header()["Connection"] = connectionClose
	}
	if o.cfg.health(r) {
		h.next.ServeHTTP(w, r)
		return
	}
	c := o.rules.Call(r).Criticality
	if rej := o.Check(r, c, time.Time{}); rej != nil {
		writeRejection(w, rej, defaultUniform, o.cfg.names)
		return
	}
	defer o.Done()
	h.next.ServeHTTP(w, r)
}

// Unwrap returns the next handler.
func (h *overloadHandler) Unwrap() http.Handler { return h.next }

// Apply implements overload.Effector: it turns keep-alive off and on and
// applies the Timeouts action to the connections, when they change.
func (o *Overload) Apply(s overload.State) {
	o.st.Store(&s)
	if off := s.Active[overload.KeepAlive]; off != o.keepOff.Load() {
		o.keepOff.Store(off)
		if o.cfg.srv != nil {
			o.cfg.srv.SetKeepAlivesEnabled(!off)
		}
	}
	o.mu.Lock()
	changed := s.Active[overload.Timeouts] != o.timeouts
	o.timeouts = s.Active[overload.Timeouts]
	var conns []*overloadConn
	if changed {
		conns = make([]*overloadConn, 0, len(o.conns))
		for c := range o.conns {
			conns = append(conns, c)
		}
	}
	o.mu.Unlock()
	for _, c := range conns {
		c.apply()
	}
}

// healKeepAlive turns keep-alive back on when the state that turned it
// off has expired (the Manager stopped stepping); it returns now, read if
// it was zero.
func (o *Overload) healKeepAlive(now time.Time) time.Time {
	if now.IsZero() {
		now = o.cfg.now()
	}
	if s := o.st.Load(); s != nil && now.After(s.Until) && o.keepOff.CompareAndSwap(true, false) && o.cfg.srv != nil {
		o.cfg.srv.SetKeepAlivesEnabled(true)
	}
	return now
}

// shortTimeouts returns the Timeouts action's idle and header timeouts
// while it is active at now, ok false otherwise (also once the state of
// the last step has expired: a Manager that stopped leaves nothing behind).
func (o *Overload) shortTimeouts(now time.Time) (idle, header time.Duration, ok bool) {
	s := o.st.Load()
	if s == nil || !s.Active[overload.Timeouts] || now.After(s.Until) {
		return 0, 0, false
	}
	return s.IdleTimeout, s.HeaderTimeout, true
}

// outOfDescriptors closes, at most every 100 ms, the connections that
// hold a descriptor for nothing after Accept failed for want of one: the
// idle ones (between requests, or never sent a byte), and those that have
// been reading a request's head for more than a second (a slow or hostile
// sender). It reports whether it closed any.
func (o *Overload) outOfDescriptors() bool {
	now := o.cfg.now()
	o.mu.Lock()
	if now.Sub(o.lastClose) < 100*time.Millisecond && !now.Before(o.lastClose) {
		o.mu.Unlock()
		return false
	}
	o.lastClose = now
	slow := now.Add(-time.Second).UnixNano()
	var idle []*overloadConn
	for c := range o.conns {
		switch c.phase.Load() {
		case phaseIdle:
			idle = append(idle, c)
		case phaseHead:
			if c.since.Load() < slow {
				idle = append(idle, c)
			}
		}
	}
	o.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
	return len(idle) > 0
}

// isOutOfDescriptors reports whether err says the process (EMFILE) or the
// system (ENFILE) has no descriptor left.
func isOutOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// OverloadStatus returns a handler serving m.Status() as JSON (each
// resource against its limit, each action's state and time active, the
// requests in flight and refused): for the status page, and for a look
// with curl. Mount it outside admission control.
func OverloadStatus(m *overload.Manager) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := json.Marshal(m.Status())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(append(b, '\n'))
	})
}
