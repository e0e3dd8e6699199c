package leveehttp

import (
	"net"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/levee-dev/levee/internal/option"
	"github.com/levee-dev/levee/internal/wire"
)

// WithHosts names the hosts that speak levee's protocol, the only ones a
// Transport then acts on; requests to any other host pass through to the
// next RoundTripper untouched (no levee header, no throttle, no retry, the
// response as it came). Each pattern is
//
//	api.internal          that host, any port
//	api.internal:8443     that host and port (80 and 443 are the http and
//	                      https defaults: "api.internal:443" matches
//	                      https://api.internal/)
//	*.svc.cluster.local   any host below that domain, any port
//	10.0.0.7, [fd00::7]   an IP address (IPv6 in brackets when with a port)
//
// matched without regard to ASCII case or a trailing dot. A malformed
// pattern (empty, with a path, a scheme or spaces) panics, as every bad
// option value does.
//
// Default (neither WithHosts nor WithScope): every host is spoken to as a
// levee host (criticality, deadline and attempt sent, a throttle per host,
// retries, Levee-Reject answers read) except that the caller's tenant id
// (Levee-Tenant, which may be an API key) is sent to no host: name the
// hosts to send it. Whatever the scope, only responses carrying
// Levee-Reject become errors; any other response, a third party's 429 or
// 504 included, is returned as it came, body included.
func WithHosts(patterns ...string) TransportOption {
	ps := make([]hostPattern, 0, len(patterns))
	for _, p := range patterns {
		hp, ok := parseHostPattern(p)
		option.Check(ok, "leveehttp", "WithHosts", "each pattern must be a host, host:port or *.domain", p)
		ps = append(ps, hp)
	}
	return func(c *transportConfig) { c.hosts, c.scope = ps, nil }
}

// WithScope sets the function that says whether a request goes to a host
// that speaks levee's protocol, instead of WithHosts' patterns: in scope,
// the Transport acts on it fully (tenant id included); out of scope, it
// passes through untouched. It runs on every request and should be cheap.
// A nil f restores the default (see WithHosts).
func WithScope(f func(*http.Request) bool) TransportOption {
	return func(c *transportConfig) { c.scope, c.hosts = f, nil }
}

// hostPattern is a parsed WithHosts pattern.
type hostPattern struct {
	host   string // lower case, no trailing dot; for a wildcard, ".domain"
	port   string // "" for any
	suffix bool
}

func parseHostPattern(p string) (hostPattern, bool) {
	if p == "" || strings.ContainsAny(p, "/ \t?#@") || !utf8.ValidString(p) {
		return hostPattern{}, false
	}
	host, port := p, ""
	if h, pt, err := net.SplitHostPort(p); err == nil {
		host, port = h, pt
	} else if strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]") {
		host = p[1 : len(p)-1]
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	hp := hostPattern{host: host, port: port}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		hp.host, hp.suffix = "."+rest, true
	}
	if hp.host == "" || hp.host == "." || strings.Contains(hp.host, "*") {
		return hostPattern{}, false
	}
	return hp, true
}

func (hp hostPattern) match(host, port string) bool {
	if hp.port != "" && hp.port != port {
		return false
	}
	if hp.suffix {
		return len(host) > len(hp.host) && strings.HasSuffix(host, hp.host)
	}
	return host == hp.host
}

// scope says how the Transport treats req: inScope (levee's protocol at
// all) and tenant (send Levee-Tenant).
func (t *Transport) scope(req *http.Request) (inScope, tenant bool) {
	switch {
	case t.cfg.scope != nil:
		s := t.cfg.scope(req)
		return s, s
	case t.cfg.hosts != nil:
		host, port := splitHost(req.URL.Scheme, req.URL.Host)
		for _, hp := range t.cfg.hosts {
			if hp.match(host, port) {
				return true, true
			}
		}
		return false, false
	}
	return true, false
}

// splitHost returns the host of a URL's authority in lower case without a
// trailing dot, and its port, the scheme's default when absent.
func splitHost(scheme, authority string) (host, port string) {
	host = authority
	if h, p, err := net.SplitHostPort(authority); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	if port == "" {
		switch strings.ToLower(scheme) {
		case "https":
			port = "443"
		case "http", "":
			port = "80"
		}
	}
	return strings.TrimSuffix(lowerASCII(host), "."), port
}

// lowerASCII is strings.ToLower for ASCII letters, allocating only when
// s has an upper-case one.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// maxHostKey bounds the throttle key (and metric label) of a host.
const maxHostKey = 128

// throttleKey returns the key of the host's throttle: host:port in lower
// case without a trailing dot and with the scheme's default port made
// explicit, so that https://API.example./x and https://api.example:443/y
// share one throttle. A host that is not printable ASCII or UTF-8, or
// longer than maxHostKey, is keyed by its hash (a "h~" id): every key is a
// valid, bounded metric label. It does not allocate for a host already in
// that form.
func throttleKey(scheme, authority string) string {
	host, port := splitHost(scheme, authority)
	if len(host)+len(port) >= maxHostKey || !printable(host) || !printable(port) {
		return wire.HashTenant(scheme + "://" + authority)
	}
	open, close := "", ":"
	if strings.Contains(host, ":") { // an IPv6 literal
		open, close = "[", "]:"
	}
	if isForm(authority, open, host, close, port) {
		return authority
	}
	return open + host + close + port
}

// isForm reports whether s is a+b+c+d, without building it.
func isForm(s, a, b, c, d string) bool {
	if len(s) != len(a)+len(b)+len(c)+len(d) {
		return false
	}
	for _, part := range [...]string{a, b, c, d} {
		if s[:len(part)] != part {
			return false
		}
		s = s[len(part):]
	}
	return true
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}
