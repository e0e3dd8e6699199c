package leveehttp

import (
	"net/http"

	"github.com/levee-dev/levee/config"
)

// WithRoute sets the function that names a request's route, for the
// admission controller's per-route service times (see Route). It runs
// before next, once per request that is not a health probe, and should not
// allocate; "" means no name (the controller's default route). Default:
// when next is an *http.ServeMux, MuxRoute(next) — its pattern — and
// otherwise none. A nil f turns route names off, ServeMux included. The
// adapters for chi, gin and echo (modules contrib/chi, contrib/gin,
// contrib/echo) give such functions for their routers.
func WithRoute(f func(r *http.Request) string) HandlerOption {
	return func(c *handlerConfig) { c.route, c.routeSet = f, true }
}

// MuxRoute returns a route function naming a request by the pattern of mux
// that matches it ("GET /items/{id}", "/static/"), found before mux routes
// the request (http.ServeMux.Handler), "" when none matches. Patterns are
// few and bounded, unlike paths: a path parameter never makes a new route.
// It costs one more pattern match per request and does not allocate for
// matched paths that need no redirect.
func MuxRoute(mux *http.ServeMux) func(r *http.Request) string {
	return func(r *http.Request) string {
		_, p := mux.Handler(r)
		return p
	}
}

// WithRouter makes the Handler follow rt, a configuration's http section
// (package config) that follows reloads: rt.Trusted says who is trusted
// (replacing WithTrust), rt.Health which paths are health probes (replacing
// WithHealthPaths; still GET or HEAD on the exact path), and rt.Classify
// which route rule a request matches. A matching rule names the route (its
// name wins over WithRoute's) and, for an untrusted caller, sets the
// criticality (config.Class.For: the rule's, lowered if the caller asked
// for less; without a rule criticality, what it asked capped at CRITICAL)
// and the tenant (the rule's, when it gives one; otherwise WithTenant's or
// the caller's network prefix). Trusted callers keep their headers. Each
// request reads the section in force with one atomic load; nothing
// allocates.
func WithRouter(rt *config.Router) HandlerOption {
	return func(c *handlerConfig) {
		if rt == nil {
			return
		}
		c.trust = rt.Trusted
		c.health = rt.Health
		c.classify = rt.Classify
	}
}
