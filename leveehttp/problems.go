package leveehttp

import (
	"log/slog"
	"net/http"
	"sort"
	"sync"

	"github.com/levee-dev/levee/admit"
)

// Problems the Handler and Protect report about how they are used: misuse
// the types cannot prevent, reported once (logged at warning level and,
// under Protect, exported as levee_setup_problem{problem="…"} = 1), never
// silently ignored.
const (
	// ProblemNoArrivalStamps: an HTTP/1 request in clear text reached the
	// Handler from a connection Listener did not accept (or without
	// ConnContext): its queueing before the handler is invisible and its
	// budget counts from the handler's start. Serve with Protected.Serve,
	// or wrap the listener with Listener and set ConnContext.
	ProblemNoArrivalStamps = "no_arrival_stamps"
	// ProblemDoubleAdmission: a request reached a levee Handler from inside
	// another one: it is admitted twice, counted twice, and waits twice.
	ProblemDoubleAdmission = "double_admission"
	// ProblemShadowedPath: the application's handler serves a path that
	// Protect serves itself (status page, metrics, admin endpoint): the
	// application's handler is never reached there.
	ProblemShadowedPath = "shadowed_path"
	// ProblemTrustEveryone: http.trusted_networks covers every address
	// (0.0.0.0/0 or ::/0): every caller may claim CRITICAL_PLUS and any
	// tenant.
	ProblemTrustEveryone = "trust_everyone"
	// ProblemUnfedConcurrency: the controller steers by a concurrency
	// signal (pressure.Default holds one) that the Handler does not feed:
	// it reads 0 whatever waits inside the handler, so a dependency that
	// slows is invisible. Pass WithConcurrency(set.Concurrency), as
	// Protect does.
	ProblemUnfedConcurrency = "unfed_concurrency"
)

// WithProblemReporter sets the function told about misuse the Handler
// detects (the Problem* constants, with a sentence for people). It is
// called at most once per problem and Handler, from a request's
// goroutine. Default: a warning in slog.Default's log, once per problem.
// Protect reports to its own log and metric.
func WithProblemReporter(f func(problem, detail string)) HandlerOption {
	return func(c *handlerConfig) { c.report = f }
}

// check looks at the Handler's first request for misuse the types cannot
// prevent (see the Problem* constants).
func (h *Handler) check(r *http.Request, conn *stampConn) {
	if !h.checked.CompareAndSwap(false, true) {
		return
	}
	if conn == nil && r.ProtoMajor == 1 && r.TLS == nil {
		h.cfg.report(ProblemNoArrivalStamps, "requests arrive without arrival stamps: the queue before the handler is invisible and budgets count from the handler's start; serve with leveehttp.Listener and ConnContext (Protected.Serve does)")
	}
	if stateFrom(r.Context()) != nil {
		h.cfg.report(ProblemDoubleAdmission, "a request reached a levee Handler from inside another one: it is admitted twice; protect a handler once")
	}
	if h.unfedConc {
		h.cfg.report(ProblemUnfedConcurrency, "the controller has a concurrency signal the handler does not feed: requests waiting inside the handler (a slow dependency) are invisible; pass leveehttp.WithConcurrency(set.Concurrency) (Protect does)")
	}
}

// unfed reports that c steers by a concurrency signal that a Handler
// configured with cfg does not feed.
func unfed(c *admit.Controller, cfg *handlerConfig) bool {
	if c == nil || cfg.conc != nil {
		return false
	}
	for _, s := range c.Snapshot().Signals {
		if s.Name == "concurrency" {
			return true
		}
	}
	return false
}

// problemLog reports each problem once: to a logger and into a set that
// metrics read.
type problemLog struct {
	log  *slog.Logger // nil: slog.Default() at the time of the report
	mu   sync.Mutex
	seen map[string]string // problem → detail
}

// logProblem returns a reporter logging each problem once to l (nil:
// slog.Default()).
func logProblem(l *slog.Logger) func(problem, detail string) {
	return (&problemLog{log: l}).report
}

func (p *problemLog) report(problem, detail string) {
	p.mu.Lock()
	_, dup := p.seen[problem]
	if !dup {
		if p.seen == nil {
			p.seen = make(map[string]string)
		}
		p.seen[problem] = detail
	}
	p.mu.Unlock()
	if dup {
		return
	}
	l := p.log
	if l == nil {
		l = slog.Default()
	}
	l.Warn("levee: "+detail, "problem", problem)
}

// list returns the problems reported so far, sorted.
func (p *problemLog) list() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.seen))
	for k := range p.seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
