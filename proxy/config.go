package proxy

import (
	"time"

	"github.com/levee-dev/levee/internal/outbound"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// Config is the proxy's configuration: the "proxy" section of levee's
// configuration file (the edge's admission, signals, route rules, admin
// endpoint and reloads are the file's other sections). Start from
// DefaultConfig and change fields; Check reports every problem. Fields
// tagged reload:"restart" cannot change while the proxy runs.
//
//	proxy:
//	  listen: :8080
//	  backends:
//	    static: [{address: 10.0.0.1:8080}, {address: 10.0.0.2:8080, max_conns: 64}]
//	    # or dns: {name: api.internal:8080, every: 10s}, or dns: {name: _http._tcp.api.internal, type: srv}
//	    protocol: http1            # or h2c
//	  health: {path: /healthz, every: 2s}
//	  outlier: {consecutive_failures: 5, max_ejected_share: 0.5}
//	  balance: {slow_start: 30s}
//	  retry: {max_attempts: 2}
type Config struct {
	// Listen is the address the levee proxy command serves on. Default
	// ":8080".
	Listen string `yaml:"listen" reload:"restart"`
	// Backends says where requests go and how to connect.
	Backends Backends `yaml:"backends"`
	// Balance configures the choice of a backend.
	Balance Balance `yaml:"balance"`
	// Limit configures each backend's adaptive concurrency limit.
	Limit Limit `yaml:"limit"`
	// Health configures active health checks.
	Health Health `yaml:"health"`
	// Outlier configures passive outlier detection and the ejection cap.
	Outlier Outlier `yaml:"outlier"`
	// Retry configures retries to another backend.
	Retry Retry `yaml:"retry"`
	// Throttle configures the per-backend adaptive client throttle.
	Throttle Throttle `yaml:"throttle"`
	// Queue configures the wait for a backend slot when every backend is
	// full.
	Queue Queue `yaml:"queue"`
	// Forward configures what the proxy sends and streams.
	Forward Forward `yaml:"forward"`
	// Drain configures the graceful stop on SIGTERM.
	Drain Drain `yaml:"drain"`
	// StatusPath serves the backends' status (JSON, or a text table for
	// browsers and curl with ?format=text), outside admission. Default
	// "/levee/proxy"; "" serves none.
	StatusPath string `yaml:"status_path" reload:"restart"`
}

// Backends configures the backend set and the connections to it. Exactly
// one of Static and DNS gives the set.
type Backends struct {
	// Static lists the backends.
	Static []Endpoint `yaml:"static"`
	// DNS discovers the backends by name and re-resolves it periodically.
	DNS DNS `yaml:"dns"`
	// Protocol spoken to every backend: "http1" (HTTP/1.1, the default)
	// or "h2c" (HTTP/2 without TLS, prior knowledge).
	Protocol string `yaml:"protocol" reload:"restart"`
	// Conn bounds each backend's connections; an Endpoint may override it.
	Conn Conn `yaml:"conn"`
}

// Endpoint is one static backend.
type Endpoint struct {
	// Address is host:port (an IP address or a name the dialer resolves).
	Address string `yaml:"address"`
	// MaxConns overrides backends.conn.max_conns for this backend; 0
	// keeps it.
	MaxConns int `yaml:"max_conns"`
	// ResponseHeaderTimeout overrides backends.conn.response_header_timeout
	// for this backend; 0 keeps it.
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
}

// DNS discovers backends by name.
type DNS struct {
	// Name is host:port for address records, or an SRV name
	// (_service._proto.domain) with Type "srv". "" disables DNS.
	Name string `yaml:"name"`
	// Type is "ip" (A and AAAA, the default), "ip4" (A), "ip6" (AAAA) or
	// "srv".
	Type string `yaml:"type"`
	// Every is the re-resolution period. Default 10s; range [100ms, 1h].
	Every time.Duration `yaml:"every"`
	// Timeout bounds one resolution. Default 2s; range [10ms, 1m].
	Timeout time.Duration `yaml:"timeout"`
}

// Conn bounds the connections to one backend.
type Conn struct {
	// MaxConns bounds the connections (idle and busy) to one backend; a
	// request above it waits for a connection. 0 means no bound. Default
	// 0; range [0, 1e6].
	MaxConns int `yaml:"max_conns"`
	// MaxIdleConns bounds the idle keep-alive connections kept per
	// backend. Default 64; range [0, 1e6].
	MaxIdleConns int `yaml:"max_idle_conns"`
	// DialTimeout bounds a connection attempt. Default 1s; range [1ms, 1m].
	DialTimeout time.Duration `yaml:"dial_timeout"`
	// ResponseHeaderTimeout bounds the wait for a backend's response
	// headers, per attempt; a timeout counts as overload, not failure.
	// Default 10s; range [1ms, 1h].
	ResponseHeaderTimeout time.Duration `yaml:"response_header_timeout"`
	// IdleTimeout closes a keep-alive connection idle that long. Default
	// 90s; range [1s, 1h].
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// Balance configures the choice among backends: power of two choices
// on in-flight requests, weighted by each backend's load and limit.
type Balance struct {
	// SlowStart is the window over which a backend that returns (from an
	// ejection, a restart, discovery) is ramped from SlowStartFloor of its
	// limit to all of it; 0 turns slow start off. Default 30s; range
	// [0, 1h].
	SlowStart time.Duration `yaml:"slow_start"`
	// SlowStartFloor is the share of its limit a returning backend starts
	// with. Default 0.1; range (0, 1].
	SlowStartFloor float64 `yaml:"slow_start_floor"`
	// LoadDecay is the time constant over which a backend's last
	// Levee-Load reading fades when no new one arrives (a backend that
	// gets little traffic because it reported a high load must not keep
	// that reading forever). Default 2s; range [10ms, 1h].
	LoadDecay time.Duration `yaml:"load_decay"`
}

// Limit configures each backend's adaptive concurrency limit (see the
// package documentation): learned from latency and overload answers, so
// that backends that report no load are protected too.
type Limit struct {
	// Enabled learns limits; off, every backend's limit is Max. Default
	// true.
	Enabled bool `yaml:"enabled"`
	// Initial limit of a new or returning backend. Default 20; range
	// [Min, Max].
	Initial int `yaml:"initial"`
	// Min limit. Default 2; range [1, Max].
	Min int `yaml:"min"`
	// Max limit. Default 1000; range [1, 1e6].
	Max int `yaml:"max"`
	// Tolerance is how much slower than its no-queue latency a backend may
	// answer before its limit shrinks. Default 1.5; range [1.05, 10].
	Tolerance float64 `yaml:"tolerance"`
	// Backoff multiplies the limit after a window with an overload answer
	// or a timeout. Default 0.9; range [0.1, 1).
	Backoff float64 `yaml:"backoff"`
	// Window is the sample window (and the control period). Default
	// 100ms; range [10ms, 10s].
	Window time.Duration `yaml:"window" reload:"restart"`
	// ProbeEvery re-measures a saturated backend's no-queue latency that
	// often (each backend jittered by ±20%); 0 never. Default 30s; range
	// 0 or [1s, 1h].
	ProbeEvery time.Duration `yaml:"probe_every"`
	// ProbeShare is the share of its limit a backend keeps during a probe.
	// Default 0.25; range (0, 1).
	ProbeShare float64 `yaml:"probe_share"`
}

// Health configures active health checks.
type Health struct {
	// Path is requested with GET on every backend; "" turns active checks
	// off. A 2xx answer is healthy; a levee overload or quota rejection
	// (503 or 429 with Levee-Reject), a 429, and a timeout while the
	// backend is answering proxied requests are "overloaded", which is
	// alive; anything else is a failure. Default "".
	Path string `yaml:"path"`
	// Every is the period between checks of one backend, each jittered by
	// ±Jitter. Default 2s; range [100ms, 1h].
	Every time.Duration `yaml:"every"`
	// Jitter is the share of Every by which each wait varies. Default
	// 0.2; range [0, 1).
	Jitter float64 `yaml:"jitter"`
	// Timeout bounds one check. Default 1s; range [1ms, 1m].
	Timeout time.Duration `yaml:"timeout"`
	// Unhealthy consecutive failures eject a backend. Default 3; range
	// [1, 100].
	Unhealthy int `yaml:"unhealthy"`
	// Healthy consecutive successes end an ejection. Default 2; range
	// [1, 100].
	Healthy int `yaml:"healthy"`
}

// Outlier configures passive outlier detection: consecutive failures
// (connection refused or reset, 500, 502; never an overload answer or a
// timeout) eject a backend, within the cap.
type Outlier struct {
	// ConsecutiveFailures eject a backend; 0 turns passive detection off.
	// Default 5; range [0, 1e6].
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// BaseEjection is the first ejection's duration; each consecutive
	// ejection doubles it up to MaxEjection. Default 5s; range [100ms,
	// 1h].
	BaseEjection time.Duration `yaml:"base_ejection"`
	// MaxEjection bounds an ejection's duration. Default 5m; range
	// [BaseEjection, 24h].
	MaxEjection time.Duration `yaml:"max_ejection"`
	// MaxEjectedShare caps the share of backends ejected at once, for any
	// reason: ⌊share × backends⌋. A backend that should be ejected above
	// the cap stays in rotation, last in preference. Default 0.5; range
	// [0, 1].
	MaxEjectedShare float64 `yaml:"max_ejected_share"`
}

// Retry configures retries to another backend: only for idempotent
// requests (or requests that never left), only after a connection
// failure, a reset or a 503 without no-retry, never to the same backend
// twice in a row, within a budget.
type Retry struct {
	// MaxAttempts counts attempts, the first included; 1 turns retries
	// off. Default 2; range [1, 5].
	MaxAttempts int `yaml:"max_attempts"`
	// Base is the first retry's backoff ceiling (full jitter). A retry
	// goes to another backend, so it need not wait long. Default 5ms;
	// range [0, 10s].
	Base time.Duration `yaml:"base"`
	// Cap bounds every backoff. Default 100ms; range [Base, 1m].
	Cap time.Duration `yaml:"cap"`
	// BudgetRatio of requests may be retried over BudgetWindow. Default
	// 0.1; range [0, 1].
	BudgetRatio float64 `yaml:"budget_ratio" reload:"restart"`
	// BudgetWindow is the ratio's window. Default 10s; range [100ms, 1h].
	BudgetWindow time.Duration `yaml:"budget_window" reload:"restart"`
	// BudgetFloor retries are allowed per minute whatever the ratio.
	// Default 60; range [0, 1e6].
	BudgetFloor int `yaml:"budget_floor" reload:"restart"`
	// BufferBytes of a request body are kept to replay it; a larger body
	// streams through and is never retried once sent. Default 65536;
	// range [0, 64 MiB].
	BufferBytes int `yaml:"buffer_bytes"`
}

// Throttle configures the per-backend adaptive throttle (package
// throttle): when a backend rejects much of what it is sent, the proxy
// sends it at most K times what it accepts and tries another backend.
type Throttle struct {
	// Enabled throttles. Default true.
	Enabled bool `yaml:"enabled" reload:"restart"`
	// K: a backend is sent up to K times what it accepted. Default 2;
	// range [1, 100].
	K float64 `yaml:"k"`
}

// Queue configures the wait for a slot when every backend is at its
// limit. Waiters are served by criticality, then in arrival order; a full
// queue or an expired wait sheds the lowest criticality first, with 503
// overloaded.
type Queue struct {
	// MaxWait bounds the wait (and the request's own deadline does).
	// Default 500ms; range [0, 1m]; 0 sheds at once.
	MaxWait time.Duration `yaml:"max_wait"`
	// MaxWaiting bounds the waiters; 0 means the sum of the backends'
	// limits. Default 0; range [0, 1e6].
	MaxWaiting int `yaml:"max_waiting"`
}

// Forward configures what the proxy sends upstream and streams back.
type Forward struct {
	// Host is the Host header sent: "preserve" (the caller's, the
	// default) or "backend" (the backend's address).
	Host string `yaml:"host"`
	// FlushInterval flushes a streamed response that often; 0 flushes
	// streams of unknown length at once and buffers the rest (as
	// httputil.ReverseProxy does); negative flushes after every write.
	// Default 0; range [-1h, 10s].
	FlushInterval time.Duration `yaml:"flush_interval" reload:"restart"`
	// Margin is shaved off the caller's time left before it is sent as
	// the backend's budget (Levee-Timeout-Ms), at most a tenth of it.
	// Default 10ms; range [0, 10s].
	Margin time.Duration `yaml:"margin"`
	// Timeout gives requests that carry no deadline one (the whole
	// exchange, body included); 0 gives none (each attempt is still
	// bounded by the response-header timeout). Default 0; range [0, 24h].
	Timeout time.Duration `yaml:"timeout"`
}

// Drain configures the graceful stop.
type Drain struct {
	// Delay keeps serving after SIGTERM while /readyz answers 503, so that
	// whatever routes to the proxy notices before it stops accepting.
	// Default 5s; range [0, 10m].
	Delay time.Duration `yaml:"delay"`
	// Timeout bounds the wait for in-flight requests after that. Default
	// 30s; range [0, 1h].
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultConfig returns the defaults, with no backends.
func DefaultConfig() *Config {
	return &Config{
		Listen: ":8080",
		Backends: Backends{
			DNS:      DNS{Type: "ip", Every: 10 * time.Second, Timeout: 2 * time.Second},
			Protocol: "http1",
			Conn: Conn{
				MaxIdleConns:          64,
				DialTimeout:           time.Second,
				ResponseHeaderTimeout: 10 * time.Second,
				IdleTimeout:           90 * time.Second,
			},
		},
		Balance: Balance{SlowStart: 30 * time.Second, SlowStartFloor: 0.1, LoadDecay: 2 * time.Second},
		Limit: Limit{
			Enabled: true, Initial: 20, Min: 2, Max: 1000, Tolerance: 1.5, Backoff: 0.9,
			Window: 100 * time.Millisecond, ProbeEvery: 30 * time.Second, ProbeShare: 0.25,
		},
		Health: Health{Every: 2 * time.Second, Jitter: 0.2, Timeout: time.Second, Unhealthy: 3, Healthy: 2},
		Outlier: Outlier{
			ConsecutiveFailures: 5, BaseEjection: 5 * time.Second, MaxEjection: 5 * time.Minute,
			MaxEjectedShare: 0.5,
		},
		Retry: Retry{
			MaxAttempts: 2, Base: 5 * time.Millisecond, Cap: 100 * time.Millisecond,
			BudgetRatio: 0.1, BudgetWindow: 10 * time.Second, BudgetFloor: 60, BufferBytes: 64 << 10,
		},
		Throttle:   Throttle{Enabled: true, K: throttle.DefaultK},
		Queue:      Queue{MaxWait: 500 * time.Millisecond},
		Forward:    Forward{Host: "preserve", Margin: outbound.DefaultMargin},
		Drain:      Drain{Delay: 5 * time.Second, Timeout: 30 * time.Second},
		StatusPath: "/levee/proxy",
	}
}

// policy is the retry.Policy of a Retry section, with b as its budget.
func (r Retry) policy(b *retry.Budget) retry.Policy {
	base := r.Base
	if base <= 0 {
		base = time.Nanosecond // retry.Policy reads 0 as its default
	}
	return retry.Policy{MaxAttempts: r.MaxAttempts, Base: base, Cap: max(r.Cap, base), Budget: b}
}

func (r Retry) budget() *retry.Budget {
	return retry.NewBudget(retry.WithRatio(r.BudgetRatio, r.BudgetWindow), retry.WithFloor(r.BudgetFloor, time.Minute))
}

func (l Limit) params() limitParams {
	if !l.Enabled {
		return limitParams{initial: l.Max, min: l.Max, max: l.Max, tolerance: l.Tolerance, backoff: 1, probeShare: 1}
	}
	return limitParams{
		initial: l.Initial, min: l.Min, max: l.Max, tolerance: l.Tolerance, backoff: l.Backoff,
		probeEvery: l.ProbeEvery, probeShare: l.ProbeShare,
	}
}
