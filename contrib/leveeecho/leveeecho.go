// Package leveeecho names requests by their echo route pattern for levee's
// admission control, so that service time is learned per route
// ("/items/:id", never one route per item):
//
//	e := echo.New()
//	e.GET("/items/:id", getItem)
//	p, err := leveehttp.Protect(ctx, e, leveehttp.WithHandlerOptions(leveeecho.WithRoute(e)))
//
// levee admits a request before echo routes it; the pattern is found with
// echo's own router (Router.Find, the host's router when e.Host routes
// exist), which matches without running a handler. It is a module of its
// own, so that levee does not depend on echo.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), leveeecho is an adapter on top of
// leveehttp, in its own module (github.com/levee-dev/levee/contrib/leveeecho):
// it imports leveehttp and github.com/labstack/echo/v4 only, no package of
// levee imports it, and its tests run contrib/routetest's check.
package leveeecho

import (
	"net/http"
	"reflect"

	"github.com/labstack/echo/v4"

	"github.com/levee-dev/levee/leveehttp"
)

// Route returns a route function for leveehttp.WithRoute naming a request
// by the pattern of e's routes that matches it (what c.Path() gives in
// the handler), "" when none does (404, or 405 for another method; a
// RouteNotFound handler's pattern is a name). It borrows a context from e's pool and
// does not allocate; it is safe for concurrent use. Routes may be added
// at any time.
func Route(e *echo.Echo) func(*http.Request) string {
	return func(r *http.Request) string {
		router := e.Router()
		if hosts := e.Routers(); len(hosts) > 0 {
			if hr, ok := hosts[r.Host]; ok {
				router = hr
			}
		}
		c := e.AcquireContext()
		c.Reset(r, nil)
		router.Find(r.Method, echo.GetPath(r), c)
		p := c.Path()
		if h := c.Handler(); h == nil || c.Get(echo.ContextKeyHeaderAllow) != nil || sameFunc(h, echo.NotFoundHandler) {
			p = "" // no route: 404, or 405 for another method
		}
		c.Reset(nil, nil)
		e.ReleaseContext(c)
		return p
	}
}

// WithRoute is leveehttp.WithRoute(Route(e)).
func WithRoute(e *echo.Echo) leveehttp.HandlerOption { return leveehttp.WithRoute(Route(e)) }

// sameFunc reports whether a and b are the same function.
func sameFunc(a, b echo.HandlerFunc) bool {
	return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}
