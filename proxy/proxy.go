package proxy

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// Option configures New.
type Option func(*options)

type options struct {
	ctl        *admit.Controller
	router     *config.Router
	log        *slog.Logger
	now        func() time.Time
	rand       func() uint64
	transport  func(addr string) http.RoundTripper
	resolver   Resolver
	exempt     map[string]http.Handler
	health     []string
	handlerOps []leveehttp.HandlerOption
}

// WithController admits every proxied request through ctl, the proxy's
// own admission controller (its signals are the proxy's own resources;
// quotas per tenant are ctl's). Default none: nothing is shed at the edge
// for the proxy's own sake (full backends still shed, see Queue).
func WithController(ctl *admit.Controller) Option { return func(o *options) { o.ctl = ctl } }

// WithRouter applies the configuration's http section at the edge
// (leveehttp.WithRouter: trusted networks keep their levee headers; route
// rules name requests and set an untrusted caller's criticality and
// tenant), following reloads when rt is subscribed to the Reloader. Route
// names also label the proxy's per-route metrics. Default none: nobody is
// trusted, every request gets what it asks (at most CRITICAL) and its
// network prefix as tenant.
func WithRouter(rt *config.Router) Option { return func(o *options) { o.router = rt } }

// WithLogger sets the structured logger (ejections, returns, discovery,
// reloads, drain; each proxied request at Debug). Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock, for tests on virtual time. Default time.Now.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithRand sets the random source of the balancer and the checks' jitter,
// for reproducible tests. It must be safe for concurrent use. Default
// math/rand/v2's.
func WithRand(f func() uint64) Option { return func(o *options) { o.rand = f } }

// WithTransport replaces the connection pool built for each backend
// (tests, or TLS to the backends): f returns the RoundTripper for a
// backend's host:port. The Conn settings other than the backend set are
// then the RoundTripper's business.
func WithTransport(f func(addr string) http.RoundTripper) Option {
	return func(o *options) { o.transport = f }
}

// WithResolver sets the DNS resolver of backends.dns. Default
// net.DefaultResolver.
func WithResolver(r Resolver) Option { return func(o *options) { o.resolver = r } }

// WithExempt serves h at path, outside admission: never shed, never
// proxied. A path ending in "/" serves everything below it too. The
// command mounts /metrics, levee's status page and the admin endpoint
// this way.
func WithExempt(path string, h http.Handler) Option {
	return func(o *options) {
		if o.exempt == nil {
			o.exempt = map[string]http.Handler{}
		}
		o.exempt[path] = h
	}
}

// WithHealthPaths sets the proxy's own probe paths, never shed and never
// proxied: every one answers 200, except that /readyz (or the second path
// given) answers 503 while draining. Default /healthz, /readyz, /livez.
func WithHealthPaths(paths ...string) Option {
	return func(o *options) { o.health = slices.Clone(paths) }
}

// WithHandlerOptions passes options to the edge's leveehttp.Handler
// (leveehttp.WithQueueDelay, leveehttp.WithLoadHeader, …). Give the route
// rules with WithRouter, not here.
func WithHandlerOptions(opts ...leveehttp.HandlerOption) Option {
	return func(o *options) { o.handlerOps = append(o.handlerOps, opts...) }
}

// Handler is levee's load-balancing reverse proxy, an http.Handler built
// on httputil.ReverseProxy: edge admission, backends with adaptive limits
// and load-aware balancing, retries within a budget, ejection within a
// cap (see the package documentation). Build it with New, start its loops
// with Run. It is safe for concurrent use.
type Handler struct {
	settings atomic.Pointer[settings]
	bal      *balancer
	rp       *httputil.ReverseProxy
	edge     http.Handler
	router   *config.Router
	exempt   map[string]http.Handler
	prefixes []string // exempt paths ending in "/"
	ready    string   // the probe path that fails while draining
	log      *slog.Logger
	now      func() time.Time
	rand     func() uint64
	budget   *retry.Budget
	rt       func(addr string) http.RoundTripper
	resolver Resolver
	routes   routeTable
	answers  [numAnswers]atomic.Uint64
	draining atomic.Bool
	resolved chan struct{} // a new DNS set is wanted now (reload)

	mu  sync.Mutex // the configuration in force, reloads
	cfg *Config
}

// settings is a configuration compiled for the request path and the
// control loop; replaced whole on reload.
type settings struct {
	cfg          *Config
	loop         loopParams
	policy       retry.Policy
	attemptBound time.Duration
	bufferBytes  int
	queueWait    time.Duration
	margin       time.Duration
	timeout      time.Duration
	hostBackend  bool
}

func compile(c *Config, budget *retry.Budget) *settings {
	return &settings{
		cfg: c,
		loop: loopParams{
			rot: rotationParams{
				healthOn: c.Health.Path != "", unhealthy: c.Health.Unhealthy, healthy: c.Health.Healthy,
				consecutive: c.Outlier.ConsecutiveFailures, baseEject: c.Outlier.BaseEjection,
				maxEject: c.Outlier.MaxEjection, maxShare: c.Outlier.MaxEjectedShare,
				slowWindow: c.Balance.SlowStart, slowFloor: c.Balance.SlowStartFloor,
			},
			limit:      c.Limit.params(),
			loadDecay:  c.Balance.LoadDecay,
			minSamples: minSamples,
			maxWindow:  max(time.Second, 2*c.Limit.Window),
			maxWaiting: c.Queue.MaxWaiting,
		},
		policy:       c.Retry.policy(budget),
		attemptBound: time.Duration(c.Retry.MaxAttempts) * c.Backends.Conn.ResponseHeaderTimeout,
		bufferBytes:  c.Retry.BufferBytes,
		queueWait:    c.Queue.MaxWait,
		margin:       c.Forward.Margin,
		timeout:      c.Forward.Timeout,
		hostBackend:  c.Forward.Host == "backend",
	}
}

// minSamples is the number of answers a sample window should hold before
// it steps a limit; sparser windows are merged (up to a second).
const minSamples = 5

// New returns a Handler for cfg (checked with Check; nil means
// DefaultConfig, which has no backends and fails). With backends.dns it
// resolves the name once before returning (bounded by dns.timeout; a
// failure is logged and Run keeps trying).
func New(cfg *Config, opts ...Option) (*Handler, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	var o options
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.rand == nil {
		o.rand = rand.Uint64
	}
	if o.resolver == nil {
		o.resolver = net.DefaultResolver
	}
	if o.health == nil {
		o.health = []string{"/healthz", "/readyz", "/livez"}
	}
	cfg = clone(cfg)
	h := &Handler{
		bal:      newBalancer(o.rand),
		router:   o.router,
		log:      o.log,
		now:      o.now,
		rand:     o.rand,
		budget:   cfg.Retry.budget(),
		rt:       o.transport,
		resolver: o.resolver,
		resolved: make(chan struct{}, 1),
		cfg:      cfg,
	}
	h.settings.Store(compile(cfg, h.budget))
	h.exempt = map[string]http.Handler{}
	for i, p := range o.health {
		h.exempt[p] = http.HandlerFunc(h.serveProbe)
		if i == 1 || p == "/readyz" {
			h.ready = p
		}
	}
	if cfg.StatusPath != "" {
		h.exempt[cfg.StatusPath] = http.HandlerFunc(h.serveStatus)
	}
	for p, x := range o.exempt {
		h.exempt[p] = x
		if strings.HasSuffix(p, "/") {
			h.prefixes = append(h.prefixes, p)
		}
	}
	slices.Sort(h.prefixes)
	h.rp = &httputil.ReverseProxy{
		Rewrite:       h.rewrite,
		Transport:     &forwarder{h},
		FlushInterval: cfg.Forward.FlushInterval,
		ErrorHandler:  h.answerError,
		ErrorLog:      slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
		BufferPool:    bufferPool{},
	}
	// The proxy serves its probes before the edge: none reaches it.
	hopts := append([]leveehttp.HandlerOption{leveehttp.WithHealthPaths()}, o.handlerOps...)
	if o.router != nil {
		hopts = append(hopts, leveehttp.WithRouter(o.router))
	}
	h.edge = leveehttp.NewHandler(h.rp, o.ctl, hopts...)

	now := h.now()
	if len(cfg.Backends.Static) > 0 {
		h.setBackends(staticAddrs(cfg), now, true)
	} else {
		h.refresh(context.Background(), now, true)
	}
	return h, nil
}

func clone(c *Config) *Config {
	d := *c
	d.Backends.Static = slices.Clone(c.Backends.Static)
	return &d
}

func staticAddrs(c *Config) []string {
	out := make([]string, len(c.Backends.Static))
	for i, e := range c.Backends.Static {
		out[i] = e.Address
	}
	return out
}

// connSpec is a backend's connection settings; a backend whose spec
// changes gets a new connection pool.
type connSpec struct {
	maxConns, maxIdle           int
	dial, responseHeaders, idle time.Duration
	h2c                         bool
}

func specFor(c *Config, addr string) connSpec {
	cn := c.Backends.Conn
	s := connSpec{
		maxConns: cn.MaxConns, maxIdle: cn.MaxIdleConns, dial: cn.DialTimeout,
		responseHeaders: cn.ResponseHeaderTimeout, idle: cn.IdleTimeout, h2c: c.Backends.Protocol == "h2c",
	}
	for _, e := range c.Backends.Static {
		if e.Address != addr {
			continue
		}
		if e.MaxConns > 0 {
			s.maxConns = e.MaxConns
		}
		if e.ResponseHeaderTimeout > 0 {
			s.responseHeaders = e.ResponseHeaderTimeout
		}
	}
	return s
}

// newTransport is a backend's own connection pool.
func newTransport(s connSpec) *http.Transport {
	d := &net.Dialer{Timeout: s.dial, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		MaxConnsPerHost:       s.maxConns,
		MaxIdleConnsPerHost:   s.maxIdle,
		IdleConnTimeout:       s.idle,
		ResponseHeaderTimeout: s.responseHeaders,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	if s.h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return tr
}

// setBackends makes addrs the backend set (see balancer.update).
func (h *Handler) setBackends(addrs []string, now time.Time, initial bool) {
	s := h.settings.Load()
	build := func(addr string, prev *backend) *backend {
		spec := specFor(s.cfg, addr)
		if prev != nil && (h.rt != nil || prev.spec == spec) {
			return prev
		}
		hs := fnv.New64a()
		hs.Write([]byte(addr))
		seed := hs.Sum64()
		jitter := 0.8 + 0.4*float64(seed>>11)/(1<<53)
		b := &backend{addr: addr, spec: spec, seed: seed, lim: newAdaptiveLimit(s.loop.limit, jitter)}
		if h.rt != nil {
			b.rt = h.rt(addr)
		} else {
			b.tr = newTransport(spec)
			b.rt = b.tr
		}
		if s.cfg.Throttle.Enabled {
			b.th = throttle.New(throttle.WithK(s.cfg.Throttle.K), throttle.WithSeed(b.seed))
		}
		b.cost.Store(math.Float64bits(1))
		return b
	}
	added, removed := h.bal.update(addrs, build, now, initial, &s.loop)
	for _, a := range added {
		h.log.Info("proxy: backend added", "backend", a, "slow_start", !initial)
	}
	for _, a := range removed {
		h.log.Info("proxy: backend removed; draining", "backend", a)
	}
}

// Step runs one period of the control loop at now: limits, ejections and
// returns, slow start, queue. Run calls it every limit.window; tests on
// virtual time call it directly.
func (h *Handler) Step(now time.Time) {
	s := h.settings.Load()
	changes, restarted := h.bal.step(now, &s.loop)
	for _, c := range changes {
		if c.returned {
			h.log.Info("proxy: backend back in rotation; ramping", "backend", c.b.addr, "slow_start", s.cfg.Balance.SlowStart)
			continue
		}
		h.log.Warn("proxy: backend ejected", "backend", c.b.addr, "cause", c.cause.String(), "for", c.for_,
			"consecutive_failures", c.b.consec.Load(), "health_failures", c.b.health.failRun.Load())
	}
	for _, b := range restarted {
		h.log.Info("proxy: backend answers again after refusing connections; ramping", "backend", b.addr)
	}
}

// Run runs the control loop, the active health checks and the DNS
// re-resolution until ctx ends.
func (h *Handler) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if h.settings.Load().cfg.Backends.DNS.Name != "" {
		wg.Go(func() { h.runDNS(ctx) })
	}
	t := time.NewTicker(h.settings.Load().cfg.Limit.Window)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			now := h.now()
			h.Step(now)
			h.scheduleChecks(ctx, now, &wg)
		}
	}
}

// Apply makes cfg the configuration in force: the backend set, limits,
// ejection, retries, queue and forwarding change for the next request;
// requests in flight finish as they started. It returns an error, and
// changes nothing, when cfg is invalid or changes a field tagged
// reload:"restart". It implements a reload target's Apply with Check done.
func (h *Handler) Apply(cfg *Config) error {
	if err := h.check(cfg); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.cfg
	if reflect.DeepEqual(old, cfg) {
		return nil
	}
	cfg = clone(cfg)
	h.cfg = cfg
	s := compile(cfg, h.budget)
	h.settings.Store(s)
	h.bal.setParams(&s.loop, cfg.Throttle.K)
	now := h.now()
	switch {
	case len(cfg.Backends.Static) > 0:
		h.setBackends(staticAddrs(cfg), now, false)
	case cfg.Backends.DNS != old.Backends.DNS:
		select {
		case h.resolved <- struct{}{}:
		default:
		}
	}
	h.log.Info("proxy: configuration applied")
	return nil
}

// check says whether cfg may replace the configuration in force.
func (h *Handler) check(cfg *Config) error {
	if err := cfg.Check(); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if ch := restartChanges(h.cfg, cfg); len(ch) > 0 {
		return fmt.Errorf("proxy: %v cannot change while running (restart to apply)", ch)
	}
	return nil
}

// CloseIdleConnections closes the idle keep-alive connections to every
// backend (after a stop, or to count connections in a test).
func (h *Handler) CloseIdleConnections() {
	h.bal.mu.Lock()
	defer h.bal.mu.Unlock()
	for _, b := range h.bal.all {
		if c, ok := b.rt.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
	}
}

// Drain starts the graceful stop: the readiness probe answers 503 so that
// whatever routes to the proxy stops sending, while requests are still
// served. Stop accepting with http.Server.Shutdown after drain.delay.
func (h *Handler) Drain() {
	if !h.draining.Swap(true) {
		h.log.Info("proxy: draining")
	}
}

func (h *Handler) serveProbe(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Path == h.ready && h.draining.Load() {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// ServeHTTP serves the proxy's own paths (probes, status, WithExempt's)
// and proxies everything else through the edge's admission.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if x, ok := h.exempt[r.URL.Path]; ok {
		x.ServeHTTP(w, r)
		return
	}
	for _, p := range h.prefixes {
		if strings.HasPrefix(r.URL.Path, p) {
			h.exempt[p].ServeHTTP(w, r)
			return
		}
	}
	st := &reqState{parent: r.Context(), w: w, start: h.now()}
	route := ""
	if h.router != nil {
		route = h.router.Classify(r).Route
	}
	st.route = h.routes.get(route)
	var ctx context.Context = st
	if t := h.settings.Load().timeout; t > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t)
		defer cancel()
	}
	h.edge.ServeHTTP(st, r.WithContext(ctx))
	st.route.observe(st, h.now())
}

// rewrite is the ReverseProxy's Rewrite: the backend is chosen per attempt
// by the forwarder; X-Forwarded-* are set, appending to a trusted caller's
// X-Forwarded-For.
func (h *Handler) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "backend"
	if h.router != nil && h.router.Trusted(pr.In) {
		pr.Out.Header["X-Forwarded-For"] = pr.In.Header["X-Forwarded-For"]
	}
	pr.SetXForwarded()
}

// HeaderError names, on an answer the proxy gives instead of a backend,
// why: unreachable, reset, timeout, no-backend, bad-gateway, or a levee
// rejection's reason.
const HeaderError = "Levee-Proxy-Error"

// answer kinds, for the counters.
type answerKind uint8

const (
	answerUnreachable answerKind = iota
	answerReset
	answerTimeout
	answerNoBackend
	answerBadGateway
	answerShed     // the queue or the throttle: 503 overloaded
	answerGaveUp   // retries spent on overloaded backends: 503 no-retry
	answerDeadline // 504 deadline
	answerQuota    // 429 (a backend's, after retries)
	answerCallerGone
	numAnswers
)

var answerNames = [numAnswers]string{"unreachable", "reset", "timeout", "no-backend", "bad-gateway",
	"shed", "gave-up", "deadline", "quota", "caller-gone"}

// answerError is the ReverseProxy's ErrorHandler: the proxy answers for
// a backend. Statuses: a levee rejection as levee's servers answer it
// (503 overloaded from the queue or the throttle, 503 "overloaded;
// no-retry" after retries spent on overloaded backends, 504 deadline);
// 502 when no backend could be reached or the connection broke; 504 when
// no response headers came in time; 503 when no backend is in rotation. A
// caller that went away gets nothing.
func (h *Handler) answerError(w http.ResponseWriter, r *http.Request, err error) {
	st := stateFrom(r.Context())
	kind, status := answerBadGateway, http.StatusBadGateway
	var rej *levee.RejectedError
	var pe *proxyError
	switch {
	case errors.Is(err, context.Canceled):
		kind = answerCallerGone
	case errors.As(err, &rej):
		switch {
		case rej.Reason == levee.Deadline:
			kind = answerDeadline
		case rej.Reason == levee.Quota:
			kind = answerQuota
		case rej.NoRetry || rej.Reason == levee.Throttled:
			kind = answerGaveUp
		default:
			kind = answerShed
		}
	case errors.As(err, &pe):
		switch pe.kind {
		case failUnreachable:
			kind = answerUnreachable
		case failReset:
			kind = answerReset
		case failTimeout:
			kind, status = answerTimeout, http.StatusGatewayTimeout
		case failNoBackend:
			kind, status = answerNoBackend, http.StatusServiceUnavailable
		}
	}
	h.answers[kind].Add(1)
	if st != nil {
		st.answer = kind + 1
	}
	h.log.Debug("proxy: answered for the backend", "kind", answerNames[kind], "path", r.URL.Path, "err", err)
	if kind == answerCallerGone {
		return
	}
	w.Header().Set(HeaderError, answerNames[kind])
	if rej != nil {
		if rej.Reason == levee.Throttled {
			rej = &levee.RejectedError{Reason: levee.Overloaded, NoRetry: true}
		}
		leveehttp.WriteRejection(w, rej)
		return
	}
	http.Error(w, "levee proxy: "+answerNames[kind], status)
}

// bufferPool recycles the ReverseProxy's copy buffers.
type bufferPool struct{}

var buffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufferPool) Get() []byte  { return *buffers.Get().(*[]byte) }
func (bufferPool) Put(b []byte) { buffers.Put(&b) }
