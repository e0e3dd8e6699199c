// Package leveechi names requests by their chi route pattern for levee's
// admission control, so that service time is learned per route
// ("/items/{id}", never one route per item):
//
//	r := chi.NewRouter()
//	r.Get("/items/{id}", getItem)
//	p, err := leveehttp.Protect(ctx, r, leveehttp.WithHandlerOptions(leveechi.WithRoute(r)))
//
// levee admits a request before the router runs, so the pattern is found
// with the router's own Find, which matches without running anything.
// It is a module of its own, so that levee does not depend on chi.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), leveechi is an adapter on top of
// leveehttp, in its own module (github.com/levee-dev/levee/contrib/leveechi):
// it imports leveehttp and github.com/go-chi/chi/v5 only, no package of levee
// imports it, and its tests run contrib/routetest's check.
package leveechi

import (
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/levee-dev/levee/leveehttp"
)

// Route returns a route function for leveehttp.WithRoute naming a request
// by the pattern of r that matches it (mounted sub-routers included:
// "/api/v1/items/{id}"), "" when none does. It reuses routing contexts
// from a pool: it does not allocate for patterns without parameters and
// is safe for concurrent use.
func Route(r chi.Routes) func(*http.Request) string {
	pool := sync.Pool{New: func() any { return chi.NewRouteContext() }}
	return func(req *http.Request) string {
		rctx := pool.Get().(*chi.Context)
		rctx.Reset()
		path := req.URL.RawPath
		if path == "" {
			path = req.URL.Path
		}
		pattern := r.Find(rctx, req.Method, path)
		pool.Put(rctx)
		return pattern
	}
}

// WithRoute is leveehttp.WithRoute(Route(r)).
func WithRoute(r chi.Routes) leveehttp.HandlerOption { return leveehttp.WithRoute(Route(r)) }
