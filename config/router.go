package config

import (
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"sync/atomic"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
)

// Router applies the http section on the request path: which paths are
// health probes, which callers are trusted, and which route rule a request
// matches. It is a Target: subscribed to a Reloader, it follows every
// reload, and each call reads the section in force with one atomic load.
// Health, Trusted and Classify take no lock and do not allocate (see
// BenchmarkClassify). Safe for concurrent use.
type Router struct {
	p atomic.Pointer[routing]
}

type routing struct {
	health   map[string]struct{}
	trusted  []Network
	rules    []rule
	needAddr bool // some rule matches networks
}

type rule struct {
	name         string
	path         string
	prefix       bool // path ends in "/": the subtree
	methods      []string
	headers      []headerMatch
	networks     []Network
	crit         levee.Criticality
	hasCrit      bool
	tenant       string
	tenantHeader string // canonical
}

type headerMatch struct {
	name, value string // canonical name; value "*" matches any
}

// NewRouter returns a Router for cfg's http section.
func NewRouter(cfg *Config) *Router {
	r := &Router{}
	r.Apply(cfg)
	return r
}

// Check accepts every validated configuration.
func (r *Router) Check(*Config) error { return nil }

// Apply puts next's http section in force.
func (r *Router) Apply(next *Config) { r.p.Store(compile(next.HTTP)) }

func compile(h HTTP) *routing {
	rt := &routing{health: make(map[string]struct{}, len(h.HealthPaths)), trusted: append([]Network(nil), h.TrustedNetworks...)}
	for _, p := range h.HealthPaths {
		rt.health[p] = struct{}{}
	}
	for _, x := range h.Routes {
		ru := rule{
			name:     x.Name,
			path:     x.Path,
			prefix:   strings.HasSuffix(x.Path, "/"),
			methods:  append([]string(nil), x.Methods...),
			networks: append([]Network(nil), x.Networks...),
			tenant:   wire.FormatTenant(x.Tenant),
		}
		for name, v := range x.Headers {
			ru.headers = append(ru.headers, headerMatch{textproto.CanonicalMIMEHeaderKey(name), v})
		}
		if x.TenantHeader != "" {
			ru.tenantHeader = textproto.CanonicalMIMEHeaderKey(x.TenantHeader)
		}
		if x.Criticality != "" {
			if c, err := levee.ParseCriticality(x.Criticality); err == nil {
				ru.crit, ru.hasCrit = c, true
			}
		}
		rt.needAddr = rt.needAddr || len(ru.networks) > 0
		rt.rules = append(rt.rules, ru)
	}
	return rt
}

// Health reports whether path is a health or readiness path (exact match):
// such requests are never shed and never counted.
func (r *Router) Health(path string) bool {
	_, ok := r.p.Load().health[path]
	return ok
}

// Trusted reports whether req comes from a trusted network
// (http.trusted_networks): its levee headers are then believed in full.
// Use it as leveehttp.WithTrust's function.
func (r *Router) Trusted(req *http.Request) bool {
	rt := r.p.Load()
	if len(rt.trusted) == 0 {
		return false
	}
	return trusted(rt, remoteAddr(req))
}

// TrustedAddr is Trusted for a client address (gRPC's peer address).
func (r *Router) TrustedAddr(addr netip.Addr) bool { return trusted(r.p.Load(), addr) }

func trusted(rt *routing, addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	for _, n := range rt.trusted {
		if n.Contains(addr) {
			return true
		}
	}
	return false
}

func remoteAddr(req *http.Request) netip.Addr {
	if ap, err := netip.ParseAddrPort(req.RemoteAddr); err == nil {
		return ap.Addr()
	}
	a, _ := netip.ParseAddr(req.RemoteAddr)
	return a
}

// Class is what the first matching route rule says about a request.
type Class struct {
	// Route is the rule's name; "" when no rule matched.
	Route string
	// Criticality, when HasCriticality, is the criticality the rule gives
	// untrusted callers (see Class.For).
	Criticality    levee.Criticality
	HasCriticality bool
	// Tenant is the tenant the rule gives untrusted callers (fixed, or
	// read from its tenant_header); "" when it gives none.
	Tenant string
}

// For returns the criticality of an untrusted caller's request under the
// class, given the criticality it asked for (asked, from its
// Levee-Criticality header; has false when it sent none): the rule's
// criticality, lowered to the caller's if it asked for less; without a
// rule criticality, what it asked capped at CRITICAL (an untrusted caller
// never raises itself), CRITICAL when it asked nothing. Trusted callers
// keep what they asked and ignore the class.
func (c Class) For(asked levee.Criticality, has bool) levee.Criticality {
	if !asked.Valid() {
		has = false
	}
	if !c.HasCriticality {
		if !has || asked.Rank() > levee.Critical.Rank() {
			return levee.Critical
		}
		return asked
	}
	if has && asked.Rank() < c.Criticality.Rank() {
		return asked
	}
	return c.Criticality
}

// Classify returns the class of the first route rule req matches, and the
// zero Class when none does.
func (r *Router) Classify(req *http.Request) Class {
	rt := r.p.Load()
	var addr netip.Addr
	if rt.needAddr {
		addr = remoteAddr(req)
	}
	for i := range rt.rules {
		ru := &rt.rules[i]
		if !ru.matches(req, addr) {
			continue
		}
		c := Class{Route: ru.name, Criticality: ru.crit, HasCriticality: ru.hasCrit, Tenant: ru.tenant}
		if c.Tenant == "" && ru.tenantHeader != "" {
			c.Tenant, _ = wire.ParseTenant(req.Header[ru.tenantHeader])
		}
		return c
	}
	return Class{}
}

func (ru *rule) matches(req *http.Request, addr netip.Addr) bool {
	if ru.path != "" {
		p := req.URL.Path
		if ru.prefix {
			if !strings.HasPrefix(p, ru.path) {
				return false
			}
		} else if p != ru.path {
			return false
		}
	}
	if len(ru.methods) > 0 {
		ok := false
		for _, m := range ru.methods {
			if req.Method == m {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, h := range ru.headers {
		vals := req.Header[h.name]
		if len(vals) == 0 {
			return false
		}
		if h.value == "*" {
			continue
		}
		ok := false
		for _, v := range vals {
			if v == h.value {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	if len(ru.networks) > 0 {
		ok := false
		for _, n := range ru.networks {
			if n.Contains(addr) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
