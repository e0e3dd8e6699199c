package fleet

import (
	"net/http"

	"github.com/levee-dev/levee"
)

// Handler meters next: each request's handler wall time is recorded for
// its tenant (levee.TenantFrom of the request's context, as set by
// leveehttp.NewHandler) on the route named by route (nil: every request
// is route ""). Put it inside leveehttp's handler, around the work that
// costs:
//
//	leveehttp.NewHandler(l.Handler(mux, routeOf), ctl)
//
// The meter allocates nothing per request once a tenant has been seen.
func (l *Limiter) Handler(next http.Handler, route func(*http.Request) string) http.Handler {
	return &meterHandler{l: l, next: next, route: route}
}

type meterHandler struct {
	l     *Limiter
	next  http.Handler
	route func(*http.Request) string
}

func (h *meterHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := ""
	if h.route != nil {
		name = h.route(r)
	}
	sp := h.l.Start(levee.TenantFrom(r.Context()), name)
	defer sp.End()
	h.next.ServeHTTP(w, r)
}

// Unwrap returns the wrapped handler.
func (h *meterHandler) Unwrap() http.Handler { return h.next }
