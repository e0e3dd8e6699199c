package soak

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

// Sources hands out loopback source addresses 127.A.B.C, A in [first,
// first+16), B in [0, 256), C in [1, 255), so that consecutive
// connections come from different /16s and /24s: 4,096 /24s in 16 /16s,
// each used again only after 4,096 others. Linux routes all of
// 127.0.0.0/8 to the loopback interface, so a client may bind any of them.
// Safe for concurrent use.
type Sources struct {
	first byte
	n     atomic.Uint64
}

// NewSources returns the sources whose first octet after 127 starts at
// first (1 … 239).
func NewSources(first byte) *Sources { return &Sources{first: first} }

// Next returns the next source address.
func (s *Sources) Next() net.IP {
	i := s.n.Add(1) - 1
	return net.IPv4(127, s.first+byte(i%16), byte(i/16%256), byte(1+i/4096%254))
}

// Dial opens a TCP connection to addr from the next source address.
func (s *Sources) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: &net.TCPAddr{IP: s.Next()}}
	return d.DialContext(ctx, network, addr)
}

// Rotation names trusted tenants from a window of Window ids that slides
// by Slide ids a second: at any moment about Window tenants are active,
// and over a run of T seconds Window + Slide·T different ids are seen, so
// that per-tenant state which is never dropped shows as growing memory.
type Rotation struct {
	Window int
	Slide  float64
	start  time.Time
	n      atomic.Uint64
}

// Next returns the tenant id of the next request.
func (r *Rotation) Next(now time.Time) string {
	base := uint64(max(0, now.Sub(r.start).Seconds()) * r.Slide)
	k := r.n.Add(1) % uint64(max(1, r.Window))
	return "soak-" + strconv.FormatUint(base+k, 10)
}

// A Hostile header set: what a broken or malicious client sends in levee's
// headers and the timeout headers. Each is applied on top of a request
// levee's clients would send, replacing what it says; the server must
// answer each as an ordinary request (served, or rejected with a reason),
// never fail or panic.
type Hostile struct {
	Name string
	Set  func(h http.Header, n uint64)
}

// hugeID returns an id of n bytes, different for each k.
func hugeID(n int, k uint64) string {
	s := strconv.FormatUint(k, 36) + "-"
	return s + strings.Repeat("x", max(0, n-len(s)))
}

// HostileHeaders are the hostile header sets the soak sends through an
// ordinary HTTP client (which refuses control characters; the raw
// connections send those).
var HostileHeaders = []Hostile{
	{"criticality unknown", func(h http.Header, _ uint64) { h.Set("Levee-Criticality", "BOGUS") }},
	{"criticality 4 KB", func(h http.Header, _ uint64) { h.Set("Levee-Criticality", strings.Repeat("C", 4096)) }},
	{"criticality twice", func(h http.Header, _ uint64) {
		h["Levee-Criticality"] = []string{"SHEDDABLE", "CRITICAL_PLUS"}
	}},
	{"criticality number", func(h http.Header, _ uint64) { h.Set("Levee-Criticality", "99") }},
	{"timeout 0", func(h http.Header, _ uint64) { h.Set("Levee-Timeout-Ms", "0") }},
	{"timeout negative", func(h http.Header, _ uint64) { h.Set("Levee-Timeout-Ms", "-5") }},
	{"timeout 1 ms", func(h http.Header, _ uint64) { h.Set("Levee-Timeout-Ms", "1") }},
	{"timeout huge", func(h http.Header, _ uint64) { h.Set("Levee-Timeout-Ms", "99999999999999999999999999") }},
	{"timeout float", func(h http.Header, _ uint64) { h.Set("Levee-Timeout-Ms", "1e3") }},
	{"timeout twice", func(h http.Header, _ uint64) { h["Levee-Timeout-Ms"] = []string{"50", "abc", "-1"} }},
	{"grpc-timeout hours", func(h http.Header, _ uint64) { h.Set("Grpc-Timeout", "99999999H") }},
	{"grpc-timeout garbage", func(h http.Header, _ uint64) { h.Set("Grpc-Timeout", "5x") }},
	{"envoy timeout negative", func(h http.Header, _ uint64) { h.Set("X-Envoy-Expected-Rq-Timeout-Ms", "-1") }},
	{"attempt 9", func(h http.Header, _ uint64) { h.Set("Levee-Attempt", "9") }},
	{"attempt huge", func(h http.Header, _ uint64) { h.Set("Levee-Attempt", "18446744073709551616") }},
	{"attempt negative", func(h http.Header, _ uint64) { h.Set("Levee-Attempt", "-3") }},
	{"tenant 64 KB, new each time", func(h http.Header, n uint64) { h.Set("Levee-Tenant", hugeID(64<<10, n)) }},
	{"tenant 200 B, new each time", func(h http.Header, n uint64) { h.Set("Levee-Tenant", hugeID(200, n)) }},
	{"tenant invalid UTF-8", func(h http.Header, n uint64) {
		h.Set("Levee-Tenant", "\xff\xfe\xfd-"+strconv.FormatUint(n%64, 10))
	}},
	{"tenant UTF-8", func(h http.Header, _ uint64) { h.Set("Levee-Tenant", "locataire-é-租户") }},
	{"tenant empty", func(h http.Header, _ uint64) { h["Levee-Tenant"] = []string{""} }},
	{"tenant twice", func(h http.Header, n uint64) {
		h["Levee-Tenant"] = []string{"a" + strconv.FormatUint(n, 10), "b"}
	}},
	{"everything absurd", func(h http.Header, n uint64) {
		h.Set("Levee-Criticality", "\xff")
		h.Set("Levee-Timeout-Ms", "-0")
		h.Set("Levee-Attempt", "NaN")
		h.Set("Grpc-Timeout", "")
		h.Set("Levee-Tenant", hugeID(1000, n))
	}},
}

// variantHeader marks a request with the hostile set it carries, so that
// its answer is counted under that set's name.
const variantHeader = "Soak-Variant"

// Clients are the naive clients of a soak: trusted ones from 127.0.0.1
// with rotating tenant ids and all four criticalities, and untrusted ones
// from rotating source addresses; one request in every HostileEvery of
// either carries a hostile header set (none if HostileEvery is 0). Do sends a request through one or
// the other, alternately.
type Clients struct {
	trusted, sources *load.HTTP
	hostileEvery     uint64
	n                atomic.Uint64
	rot              *Rotation

	mu      sync.Mutex
	answers map[string]map[string]int64 // hostile set → answer class → count
}

func newClients(url string, rot *Rotation, src *Sources, hostileEvery int) (*Clients, error) {
	c := &Clients{rot: rot, answers: map[string]map[string]int64{}}
	if hostileEvery > 0 {
		c.hostileEvery = uint64(hostileEvery)
	}
	var err error
	base := load.HTTP{URL: url, Client: load.ClientNaive, Timeout: time.Second, Retries: 2, SendDeadline: true, Inspect: c.inspect}
	tr := base
	tr.Prepare = c.prepare(true)
	if c.trusted, err = load.NewHTTP(tr); err != nil {
		return nil, err
	}
	un := base
	un.Prepare = c.prepare(false)
	un.Dial = src.Dial
	if c.sources, err = load.NewHTTP(un); err != nil {
		return nil, err
	}
	return c, nil
}

// Do is the load.Func of the soak.
func (c *Clients) Do(ctx context.Context, call *load.Call) load.Outcome {
	if c.n.Add(1)%2 == 0 {
		return c.sources.Func()(ctx, call)
	}
	return c.trusted.Func()(ctx, call)
}

// prepare sets the tenant of a trusted request (the untrusted ones'
// tenant is their source's /24, whatever they send) and, on one request
// in hostileEvery, a hostile header set.
func (c *Clients) prepare(trusted bool) func(call *load.Call, attempt int, r *http.Request) {
	var k atomic.Uint64
	return func(call *load.Call, attempt int, r *http.Request) {
		if trusted {
			r.Header.Set("Levee-Tenant", c.rot.Next(time.Now()))
		}
		if n := k.Add(1); c.hostileEvery > 0 && n%c.hostileEvery == 0 {
			h := HostileHeaders[(n/c.hostileEvery)%uint64(len(HostileHeaders))]
			h.Set(r.Header, n)
			r.Header.Set(variantHeader, h.Name)
		}
	}
}

// inspect counts the answers to hostile requests by set and class.
func (c *Clients) inspect(_ *load.Call, resp *http.Response, _ []byte) {
	v := resp.Request.Header.Get(variantHeader)
	if v == "" {
		return
	}
	class := strconv.Itoa(resp.StatusCode/100) + "xx"
	if r := resp.Header.Get("Levee-Reject"); r != "" {
		reason, _, _ := strings.Cut(r, ";")
		class = strconv.Itoa(resp.StatusCode) + " " + strings.TrimSpace(reason)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers[v] == nil {
		c.answers[v] = map[string]int64{}
	}
	c.answers[v][class]++
}

// Answers returns a copy of the answers to hostile requests: set → class
// ("2xx", "503 overloaded", "504 deadline", "4xx", …) → count.
func (c *Clients) Answers() map[string]map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]map[string]int64, len(c.answers))
	for k, v := range c.answers {
		m := make(map[string]int64, len(v))
		for a, n := range v {
			m[a] = n
		}
		out[k] = m
	}
	return out
}

// CloseIdle closes the idle connections of the untrusted clients, so that
// their next requests come from new source addresses.
func (c *Clients) CloseIdle() { c.sources.CloseIdleConnections() }

// close closes every idle connection.
func (c *Clients) close() {
	c.trusted.CloseIdleConnections()
	c.sources.CloseIdleConnections()
}
