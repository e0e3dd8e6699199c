// Package leveegin names requests by their gin route pattern for levee's
// admission control, so that service time is learned per route
// ("/items/:id", never one route per item):
//
//	r := gin.New()
//	r.GET("/items/:id", getItem)
//	p, err := leveehttp.Protect(ctx, r, leveehttp.WithHandlerOptions(leveegin.WithRoute(r)))
//
// levee admits a request before gin routes it, and gin has no way to find
// a route without running it, so the adapter matches the patterns gin
// lists (Engine.Routes) with gin's rules: a static segment before a
// parameter (":id", one segment) before a catch-all ("*path", the rest).
// The table is built at the first request: routes added after it are not
// named (they fall in the controller's default route). It is a module of
// its own, so that levee does not depend on gin.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), leveegin is an adapter on top of
// leveehttp, in its own module (github.com/levee-dev/levee/contrib/leveegin):
// it imports leveehttp and github.com/gin-gonic/gin only, no package of levee
// imports it, and its tests run contrib/routetest's check.
package leveegin

import (
	"net/http"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/levee-dev/levee/leveehttp"
)

// Route returns a route function for leveehttp.WithRoute naming a request
// by the pattern of e's routes that matches its method and path
// (gin's FullPath), "" when none does. After the first request it does
// not allocate; it is safe for concurrent use.
func Route(e *gin.Engine) func(*http.Request) string {
	var once sync.Once
	var root *node
	return func(r *http.Request) string {
		once.Do(func() { root = build(e.Routes()) })
		p := r.URL.Path
		if !strings.HasPrefix(p, "/") {
			return ""
		}
		return root.match(r.Method, p[1:])
	}
}

// WithRoute is leveehttp.WithRoute(Route(e)).
func WithRoute(e *gin.Engine) leveehttp.HandlerOption { return leveehttp.WithRoute(Route(e)) }

// node is one path segment of the route table.
type node struct {
	static   map[string]*node
	param    *node
	catchAll map[string]string // method → pattern of a catch-all here
	patterns map[string]string // method → pattern ending here
}

func build(routes gin.RoutesInfo) *node {
	root := &node{}
	for _, rt := range routes {
		root.insert(rt.Method, rt.Path)
	}
	return root
}

func (n *node) insert(method, pattern string) {
	if !strings.HasPrefix(pattern, "/") {
		return
	}
	rest := pattern[1:]
	for {
		seg, tail, more := strings.Cut(rest, "/")
		if strings.HasPrefix(seg, "*") {
			n.catchAll = set(n.catchAll, method, pattern)
			return
		}
		var c *node
		if strings.HasPrefix(seg, ":") {
			if n.param == nil {
				n.param = &node{}
			}
			c = n.param
		} else {
			if n.static == nil {
				n.static = map[string]*node{}
			}
			if c = n.static[seg]; c == nil {
				c = &node{}
				n.static[seg] = c
			}
		}
		if !more {
			c.patterns = set(c.patterns, method, pattern)
			return
		}
		n, rest = c, tail
	}
}

func set(m map[string]string, k, v string) map[string]string {
	if m == nil {
		m = map[string]string{}
	}
	m[k] = v
	return m
}

// match returns the pattern for method matching rest, the path after the
// slash that leads to n's children: a static segment first, then a
// parameter (a non-empty segment), then a catch-all.
func (n *node) match(method, rest string) string {
	seg, tail, more := strings.Cut(rest, "/")
	if c := n.static[seg]; c != nil {
		if p := c.next(method, tail, more); p != "" {
			return p
		}
	}
	if n.param != nil && seg != "" {
		if p := n.param.next(method, tail, more); p != "" {
			return p
		}
	}
	return n.catchAll[method]
}

func (n *node) next(method, tail string, more bool) string {
	if !more {
		return n.patterns[method]
	}
	return n.match(method, tail)
}
