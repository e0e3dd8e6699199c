package levee

import "context"

// Pauser takes a request out of its server's count of requests in the
// handler while it waits for something the server cannot hurry: a retry's
// backoff, a downstream's Retry-After. Shedding cannot shorten such a
// wait, so it is neither a queue in the server nor its service time
// (pressure.Concurrency reads both): a mid tier whose backend pushed back
// for seconds would otherwise count the sleeping calls as waiting, refuse
// everything until they woke up, and leave its backend idle.
//
// levee's server adapters (leveehttp.Handler, leveegrpc.Server) carry one
// in every admitted request's context; levee's clients (leveehttp.Transport,
// leveegrpc's interceptors, retry.Do, the proxy) pause around their waits
// between attempts. Code that waits the same way inside a handler can do
// likewise:
//
//	if p := levee.PauserFrom(ctx); p != nil {
//		p.Pause()
//		defer p.Unpause()
//	}
//
// Pause and Unpause pair up; pauses may overlap (a handler's fan-out), and
// the request counts as paused while any of them lasts. Calls after the
// handler returned do nothing. Safe for concurrent use.
type Pauser interface {
	Pause()
	Unpause()
}

type pauserKey struct{}

type pauserCtx struct {
	context.Context
	p Pauser
}

func (c *pauserCtx) Value(key any) any {
	if _, ok := key.(pauserKey); ok {
		return c.p
	}
	return c.Context.Value(key)
}

func (c *pauserCtx) String() string { return "levee.WithPauser" }

// WithPauser returns a copy of ctx carrying p (it allocates once). Server
// adapters that keep their own context node answer PauserKey instead.
// A nil p hides any Pauser of ctx.
func WithPauser(ctx context.Context, p Pauser) context.Context {
	return &pauserCtx{Context: ctx, p: p}
}

// PauserKey returns the context key PauserFrom looks up: a server adapter
// whose request context is its own type answers it with its Pauser.
func PauserKey() any { return pauserKey{} }

// PauserFrom returns the Pauser ctx carries, or nil. It does not allocate.
func PauserFrom(ctx context.Context) Pauser {
	p, _ := ctx.Value(pauserKey{}).(Pauser)
	return p
}
