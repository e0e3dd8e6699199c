package leveehttp

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/leveeprom"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
)

// ProtectOption configures Protect.
type ProtectOption func(*protectConfig)

type protectConfig struct {
	rl      *config.Reloader
	cfg     *config.Config
	path    string
	copts   []config.Option
	handler []HandlerOption
	admit   []admit.Option
	over    []overload.Option
	status  []StatusOption
	reg     *prometheus.Registry
	logger  *slog.Logger
	server  func(*http.Server)
	runs    []func(context.Context)
	probes  []func() uint64
	grace   time.Duration
}

// WithConfig configures Protect from cfg, a configuration built in code
// (start from config.Default), with the LEVEE_* environment and opts
// applied over it (config.NewReloader). Default: config.Default() under
// the environment.
func WithConfig(cfg *config.Config, opts ...config.Option) ProtectOption {
	return func(c *protectConfig) { c.cfg, c.path, c.rl, c.copts = cfg, "", nil, opts }
}

// WithConfigFile configures Protect from the file at path, under the
// LEVEE_* environment and opts (config.Open), and follows its changes
// (reload.poll, reload.sighup, the admin endpoint's reload).
func WithConfigFile(path string, opts ...config.Option) ProtectOption {
	return func(c *protectConfig) { c.cfg, c.path, c.rl, c.copts = nil, path, nil, opts }
}

// WithReloader configures Protect from rl, which Protect then runs (do not
// call rl.Run yourself) and subscribes its parts to.
func WithReloader(rl *config.Reloader) ProtectOption {
	return func(c *protectConfig) { c.cfg, c.path, c.rl = nil, "", rl }
}

// WithHandlerOptions adds options to the Handler Protect builds, after its
// own (WithRouter, WithQueueDelay, the load header, the problem reporter):
// WithResponder, WithTenant, WithRoute, WithHeaderNames, for example. One
// that replaces Protect's (WithTrust, WithHealthPaths) turns the
// configuration's http section off for what it replaces.
func WithHandlerOptions(opts ...HandlerOption) ProtectOption {
	return func(c *protectConfig) { c.handler = append(c.handler, opts...) }
}

// WithAdmitOptions adds options to the admission controller, after those
// of the configuration and Protect's own (signals, degradation, route,
// logger, event metrics): admit.WithTenantLimiter for fleet-wide quotas,
// for example (start its loop with WithRun). admit.WithObserver replaces
// the events metric's observer.
func WithAdmitOptions(opts ...admit.Option) ProtectOption {
	return func(c *protectConfig) { c.admit = append(c.admit, opts...) }
}

// WithOverloadOptions adds options to the overload manager, after those
// of the configuration's overload section and Protect's own (the
// resources of the signals' limits, the admission controller as its
// Shedder, the logger): overload.WithObserver, overload.WithResources for
// a limit of the service's own, for example. Ignored while
// overload.enabled is false.
func WithOverloadOptions(opts ...overload.Option) ProtectOption {
	return func(c *protectConfig) { c.over = append(c.over, opts...) }
}

// WithStatusOptions adds options to the status page.
func WithStatusOptions(opts ...StatusOption) ProtectOption {
	return func(c *protectConfig) { c.status = append(c.status, opts...) }
}

// WithRegistry registers levee's collectors on reg and serves reg at the
// metrics path. Default: a registry of Protect's own holding levee's
// collectors and the Go and process collectors.
func WithRegistry(reg *prometheus.Registry) ProtectOption {
	return func(c *protectConfig) { c.reg = reg }
}

// WithLogger sets the logger for the admission controller's state changes,
// the configuration's reloads and the problems Protect reports. Default:
// slog.Default().
func WithLogger(l *slog.Logger) ProtectOption {
	return func(c *protectConfig) { c.logger = l }
}

// WithServer lets f set up the http.Server that Serve, ServeTLS and
// ListenAndServe use (timeouts, TLSConfig, ErrorLog, MaxHeaderBytes)
// before Protect sets its Handler (the Protected) and chains its
// ConnContext and ConnState after Protect's (the overload manager owns
// the server's keep-alive setting while it runs). Default: ReadHeaderTimeout 10s (a slow
// sender cannot hold a connection open with a head it never finishes) and
// IdleTimeout 2m.
func WithServer(f func(srv *http.Server)) ProtectOption {
	return func(c *protectConfig) { c.server = f }
}

// WithRun adds a loop that Protect starts with its own (signals,
// controller, configuration) and stops with them: f must return when ctx
// is done. For example a fleet quota limiter's exchange,
// func(ctx context.Context) { limiter.Run(ctx, store) }.
func WithRun(f func(ctx context.Context)) ProtectOption {
	return func(c *protectConfig) {
		if f != nil {
			c.runs = append(c.runs, f)
		}
	}
}

// WithProbes adds f's count to the probe metric (levee_probes_total):
// leveegrpc's Protect counts the gRPC health checks it lets through.
func WithProbes(f func() uint64) ProtectOption {
	return func(c *protectConfig) {
		if f != nil {
			c.probes = append(c.probes, f)
		}
	}
}

// WithShutdownGrace sets how long the server is given to finish the
// requests in flight when Protect's ctx is done (Shutdown, then Close).
// Default 10s.
func WithShutdownGrace(d time.Duration) ProtectOption {
	return func(c *protectConfig) { c.grace = max(d, 0) }
}

// Protected is a service protected by levee, built by Protect: an
// http.Handler that serves levee's own pages (the status page, the
// Prometheus metrics, the admin endpoint) outside admission control and
// every other request through a Handler, with the signals, the admission
// controller, the overload manager and the configuration running beside
// it. Serve, ServeTLS and ListenAndServe serve it with arrival stamps on
// every connection; Close and Shutdown stop the server and everything
// Protect started. Safe for concurrent use.
type Protected struct {
	handler *Handler
	ctl     *admit.Controller
	set     *pressure.Set
	deg     *degrade.Controller
	rl      *config.Reloader
	router  *config.Router
	status  *Status
	over    *Overload // nil when the configuration disables the overload manager
	admin   *Admin    // nil when the configuration does not enable it
	metrics http.Handler
	reg     *prometheus.Registry
	cols    []prometheus.Collector
	gone    atomic.Uint64 // connections its listeners closed unread (Listener)
	backlog *Backlog      // the scheduler latency with the accept queues; nil without it

	statusPath, metricsPath, adminPrefix string

	problems   problemLog
	problemCol *problemCollector
	loadHeader atomic.Bool

	srv       *http.Server
	grace     time.Duration
	cancel    context.CancelFunc
	afterStop func() bool
	wg        sync.WaitGroup
	stopOnce  sync.Once
}

// Protect protects next with levee in one call:
//
//	p, err := leveehttp.Protect(ctx, mux)
//	...
//	err = p.ListenAndServe(":8080")
//
// It reads the configuration (WithConfigFile, WithConfig; default
// config.Default() under the LEVEE_* environment), builds the signals
// (pressure.Default while the signals section is the default one, with
// the queue-delay target it learns; otherwise the signals and targets
// signals.* sets), the degradation controller (degrade.*) and the admission
// controller (admit.*, the signals, route names from Route), and starts
// them with the configuration's reload loop: nothing is left for the
// caller to start. While overload.enabled (the default) it also builds
// the overload manager (package overload) over the signals of the
// process's limits — memory, GC share, goroutines, descriptors — which
// then drive the manager rather than admission (see config.Overload for
// why): its shed floor raises the admission controller's shed level, its
// request gate sits in the Handler before admission (the in-flight cap,
// large bodies, and at the last level only CRITICAL_PLUS and health
// probes), and the server's keep-alive and its connections' idle and
// header timeouts follow its actions (Serve wraps the listener for it and
// chains its ConnState); its state is on the status page and in the
// metrics, and a reload changes its thresholds and actions. Requests go through a Handler that follows the
// configuration's http section as it reloads (WithRouter: trusted
// networks, health paths, route rules; http.load_header), feeds the
// queue-delay and concurrency signals and names routes (the ServeMux pattern when next is
// a ServeMux). Levee's own pages are served outside admission control:
// the status page at http.status_path (default /levee/status, JSON at
// …/status.json), the metrics at http.metrics_path (default /metrics) and,
// when admin.enabled, the admin endpoint at admin.path; an empty path
// serves nothing there. They take their connection's arrival stamp, so
// that the next request on a keep-alive connection is stamped right.
//
// Misuse the types cannot prevent (see the Problem* constants) is
// reported once: logged at warning level and exported as
// levee_setup_problem{problem="…"} 1.
//
// When ctx is done the server is shut down (WithShutdownGrace) and every
// loop stops; Close and Shutdown do the same at once. A nil next serves
// only levee's own pages and 404 elsewhere (leveegrpc's Protect uses
// that). The error is the configuration's (a *config.Error lists every
// problem with its file, line and field) or the CPU signal's; nothing is
// left running after an error.
func Protect(ctx context.Context, next http.Handler, opts ...ProtectOption) (*Protected, error) {
	pc := protectConfig{grace: 10 * time.Second}
	for _, o := range opts {
		if o != nil {
			o(&pc)
		}
	}
	logger := pc.logger
	if logger == nil {
		logger = slog.Default()
	}
	rl, err := pc.reloader(logger)
	if err != nil {
		return nil, err
	}
	cfg := rl.Current()
	set, err := signalSet(cfg.Signals)
	if err != nil {
		return nil, err
	}
	p := &Protected{
		set:         set,
		rl:          rl,
		router:      config.NewRouter(cfg),
		deg:         degrade.New(cfg.Degrade.Options()...),
		statusPath:  cfg.HTTP.StatusPath,
		metricsPath: cfg.HTTP.MetricsPath,
		grace:       pc.grace,
	}
	p.problems.log = logger
	if cfg.Admin.Enabled {
		p.adminPrefix = strings.TrimSuffix(cfg.Admin.Path, "/")
	}
	if set.Sched != nil {
		p.backlog = NewBacklog(set.Sched)
	}
	events := leveeprom.NewEventCollector()
	aopts := append(cfg.Admit.Options(),
		admit.WithSignals(admissionSignals(set, cfg.Overload.Enabled, p.backlog)...),
		admit.WithDegrade(p.deg),
		admit.WithRoute(Route),
		admit.WithLogger(logger),
		admit.WithObserver(events.Observe))
	p.ctl = admit.New(append(aopts, pc.admit...)...)

	p.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	if pc.server != nil {
		pc.server(p.srv)
	}
	var om *overload.Manager
	if cfg.Overload.Enabled {
		om = overload.New(append(append(cfg.Overload.Options(),
			overload.WithResources(overload.Resources(set)...),
			overload.WithShedder(p.ctl),
			overload.WithLogger(logger)), pc.over...)...)
		p.over = NewOverload(om, WithOverloadServer(p.srv), WithOverloadCounter(p.ctl.CountRejected),
			WithOverloadTrust(p.router.Trusted), WithOverloadHealth(func(r *http.Request) bool {
				return (r.Method == http.MethodGet || r.Method == http.MethodHead) && p.router.Health(r.URL.Path)
			}))
	}

	p.loadHeader.Store(cfg.HTTP.LoadHeader)
	hopts := []HandlerOption{
		WithRouter(p.router),
		withLoadHeaderFunc(p.loadHeader.Load),
		WithProblemReporter(p.Report),
	}
	if set.Queue != nil {
		hopts = append(hopts, WithQueueDelay(set.Queue))
	}
	if set.Concurrency != nil {
		hopts = append(hopts, WithConcurrency(set.Concurrency))
	}
	if p.over != nil {
		hopts = append(hopts, WithOverload(p.over))
	}
	p.handler = NewHandler(next, p.ctl, append(hopts, pc.handler...)...)

	targets := []config.Target{
		config.ApplySignals(set),
		config.ApplyDegrade(p.deg),
		p.router,
		config.TargetFunc(func(c *config.Config) { p.loadHeader.Store(c.HTTP.LoadHeader) }),
		config.ApplyAdmission(p.ctl), // dry-run and quotas at run time
	}
	if om != nil {
		targets = append(targets, config.ApplyOverload(om))
	}
	if err := rl.Subscribe(targets...); err != nil {
		return nil, err
	}

	if p.adminPrefix != "" {
		p.admin = NewAdmin(rl, WithAdminDegrade(p.deg), WithAdminShed(p.ctl), WithAdminLogger(logger))
	}

	probes := append([]func() uint64{p.handler.Probes}, pc.probes...)
	p.problemCol = newProblemCollector(&p.problems)
	p.cols = []prometheus.Collector{
		leveeprom.NewAdmitCollector(p.ctl),
		leveeprom.NewProbeCollector(func() uint64 {
			var n uint64
			for _, f := range probes {
				n += f()
			}
			return n
		}),
		events,
		leveeprom.NewConnCollector(p.gone.Load),
		leveeprom.NewConfigCollector(rl, p.admin),
		p.problemCol,
	}
	if om != nil {
		p.cols = append(p.cols, leveeprom.NewOverloadCollector(om))
	}
	p.reg = pc.reg
	if p.reg == nil {
		p.reg = prometheus.NewRegistry()
		if err := p.reg.Register(collectors.NewGoCollector()); err != nil {
			return nil, err
		}
		if err := p.reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
	}
	for _, c := range p.cols {
		if err := p.reg.Register(c); err != nil {
			return nil, err
		}
	}
	p.metrics = promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{})

	p.srv.Handler = p
	userConn := p.srv.ConnContext
	p.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		ctx = ConnContext(ctx, c)
		if userConn != nil {
			ctx = userConn(ctx, c)
		}
		return ctx
	}
	if p.over != nil {
		userState := p.srv.ConnState
		p.srv.ConnState = func(c net.Conn, s http.ConnState) {
			p.over.ConnState(c, s)
			if userState != nil {
				userState(c, s)
			}
		}
	}

	p.check(next, cfg)

	// Everything is built: start the loops.
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	sopts := []StatusOption{WithStatusContext(runCtx)}
	if om != nil {
		sopts = append(sopts, WithStatusOverload(om))
	}
	p.status = newStatus(p.ctl.Snapshot, append(sopts, pc.status...))
	p.wg.Go(func() { set.Run(runCtx) })
	p.wg.Go(func() { p.ctl.Run(runCtx) })
	if om != nil {
		p.wg.Go(func() { om.Run(runCtx) })
	}
	p.wg.Go(func() { rl.Run(runCtx) })
	for _, f := range pc.runs {
		p.wg.Go(func() { f(runCtx) })
	}
	p.afterStop = context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), p.grace)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			p.srv.Close()
		}
	})
	return p, nil
}

// admissionSignals returns the signals admission control reads: while
// the overload manager runs, the CPU, scheduler-latency, queue-delay and
// concurrency signals (those of a limit — memory, GC, goroutines,
// descriptors — are the manager's: they lag admission and are no rate to
// steer by, see config.Overload); every signal of the set otherwise. The
// scheduler latency is handed over as backlog, when there is one, so that
// the accept queues count as unread demand (Backlog).
func admissionSignals(set *pressure.Set, manager bool, backlog *Backlog) []levee.Signal {
	sigs := set.Signals()
	if backlog != nil {
		sigs = backlog.Replace(sigs)
	}
	var out []levee.Signal
	for _, s := range sigs {
		switch s.(type) {
		case *pressure.CPU, *pressure.SchedLatency, *Backlog, *pressure.QueueDelay, *pressure.Concurrency:
			out = append(out, s)
		default:
			if !manager {
				out = append(out, s)
			}
		}
	}
	return out
}

// signalSet builds the signals the section asks for: pressure.Default
// (every signal, the queue-delay target learned) when it is the default
// one, and the section's own set (the signals it enables, with the
// targets it fixes) otherwise.
func signalSet(s config.Signals) (*pressure.Set, error) {
	if reflect.DeepEqual(s, config.Default().Signals) {
		return pressure.Default()
	}
	return s.Set()
}

// reloader returns the configuration's Reloader as the options say.
func (pc *protectConfig) reloader(logger *slog.Logger) (*config.Reloader, error) {
	copts := append([]config.Option{config.WithLogger(logger)}, pc.copts...)
	switch {
	case pc.rl != nil:
		return pc.rl, nil
	case pc.path != "":
		return config.Open(pc.path, copts...)
	case pc.cfg != nil:
		return config.NewReloader(pc.cfg, copts...)
	}
	return config.NewReloader(config.Default(), copts...)
}

// withLoadHeaderFunc adds Levee-Load when f says so, per request.
func withLoadHeaderFunc(f func() bool) HandlerOption {
	return func(c *handlerConfig) { c.loadHeader = f }
}

// check reports the misuse Protect can see at start.
func (p *Protected) check(next http.Handler, cfg *config.Config) {
	if mux, ok := next.(*http.ServeMux); ok {
		for _, path := range []string{p.statusPath, p.metricsPath, p.adminPrefix} {
			if path == "" {
				continue
			}
			r, err := http.NewRequest(http.MethodGet, path, nil)
			if err != nil {
				continue
			}
			if _, pat := mux.Handler(r); pat != "" {
				p.Report(ProblemShadowedPath, "the handler's pattern "+pat+" matches "+path+", which levee serves itself: the handler is never reached there")
			}
		}
	}
	for _, n := range cfg.HTTP.TrustedNetworks {
		if n.Prefix.Bits() == 0 {
			p.Report(ProblemTrustEveryone, "http.trusted_networks has "+n.String()+": every caller may claim CRITICAL_PLUS and any tenant")
		}
	}
}

// ServeHTTP serves levee's own pages outside admission control and every
// other request through the Handler.
func (p *Protected) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if own := p.own(r.URL.Path); own != nil {
		// Take the connection's stamp, so that the next request on it
		// is stamped when its own head arrives.
		_, conn := arrivalOf(r, time.Now())
		own.ServeHTTP(w, r)
		conn.done()
		return
	}
	p.handler.ServeHTTP(w, r)
}

// own returns the handler of one of levee's own pages at path, or nil.
func (p *Protected) own(path string) http.Handler {
	switch {
	case path == "":
	case path == p.statusPath || (p.statusPath != "" && path == p.statusPath+".json"):
		return p.status
	case path == p.metricsPath:
		return p.metrics
	case p.admin != nil && (path == p.adminPrefix || strings.HasPrefix(path, p.adminPrefix+"/")):
		return p.admin
	}
	return nil
}

// Serve serves on ln (wrapped by Listener, so that every request is
// stamped when its head arrives, and, while the overload manager runs,
// by its Overload's Listener inside it, for the short timeouts and the
// connections closed when descriptors run out) until Close or Shutdown,
// and returns http.ErrServerClosed then, as http.Server.Serve does.
func (p *Protected) Serve(ln net.Listener) error {
	defer p.watch(ln)()
	return p.srv.Serve(p.listener(ln))
}

// ServeTLS is Serve over TLS (http.Server.ServeTLS): arrival stamps are
// then the handler's start (see Listener).
func (p *Protected) ServeTLS(ln net.Listener, certFile, keyFile string) error {
	defer p.watch(ln)()
	return p.srv.ServeTLS(p.listener(ln), certFile, keyFile)
}

// watch counts ln's accept queue as demand not read yet (Backlog) while
// it is served.
func (p *Protected) watch(ln net.Listener) (unwatch func()) {
	if p.backlog == nil {
		return func() {}
	}
	return p.backlog.Watch(ln)
}

// listener wraps ln: the arrival stamps outside, so that they see every
// byte the server reads, the overload manager's connections inside.
func (p *Protected) listener(ln net.Listener) net.Listener {
	if p.over != nil {
		ln = p.over.Listener(ln)
	}
	return newListener(ln, &p.gone)
}

// ListenAndServe listens on the TCP address addr and calls Serve.
func (p *Protected) ListenAndServe(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return p.Serve(ln)
}

// Shutdown shuts the server down gracefully (http.Server.Shutdown: ctx
// bounds the wait for requests in flight), then stops every loop Protect
// started. It returns the server's error.
func (p *Protected) Shutdown(ctx context.Context) error {
	err := p.srv.Shutdown(ctx)
	p.stop()
	return err
}

// Close closes the server and its connections at once
// (http.Server.Close), then stops every loop Protect started and waits for
// them. It returns the server's error; it is safe to call more than once.
func (p *Protected) Close() error {
	err := p.srv.Close()
	p.stop()
	return err
}

func (p *Protected) stop() {
	p.stopOnce.Do(func() {
		p.afterStop()
		p.cancel()
		p.wg.Wait()
		p.status.Stop()
	})
}

// Handler returns the Handler requests go through.
func (p *Protected) Handler() *Handler { return p.handler }

// Controller returns the admission controller.
func (p *Protected) Controller() *admit.Controller { return p.ctl }

// Signals returns the resource signals the controller reads.
func (p *Protected) Signals() *pressure.Set { return p.set }

// Degrade returns the degradation controller (degrade.FromContext reads
// its level in handlers).
func (p *Protected) Degrade() *degrade.Controller { return p.deg }

// Reloader returns the configuration in force and its reloads.
func (p *Protected) Reloader() *config.Reloader { return p.rl }

// Router returns the configuration's http section as the Handler applies
// it (trusted networks, health paths, route rules).
func (p *Protected) Router() *config.Router { return p.router }

// Overload returns the overload manager's HTTP side (its Manager with
// Manager()), nil while overload.enabled is false.
func (p *Protected) Overload() *Overload { return p.over }

// Status returns the status page.
func (p *Protected) Status() *Status { return p.status }

// Server returns the http.Server that Serve uses.
func (p *Protected) Server() *http.Server { return p.srv }

// Registry returns the registry served at the metrics path.
func (p *Protected) Registry() *prometheus.Registry { return p.reg }

// Collectors returns levee's collectors (admission, probes, events,
// configuration, setup problems, the overload manager), registered on
// Registry; register them elsewhere only with another registry.
func (p *Protected) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector(nil), p.cols...)
}

// Report records a problem with how the service is set up, once per
// problem: logged at warning level with detail, and exported as
// levee_setup_problem{problem=problem} 1. The Handler and leveegrpc report
// misuse through it; a service may report its own.
func (p *Protected) Report(problem, detail string) { p.problems.report(problem, detail) }

// Problems returns the problems reported so far, sorted.
func (p *Protected) Problems() []string { return p.problems.list() }

// problemCollector exports the problems reported.
type problemCollector struct {
	log  *problemLog
	desc *prometheus.Desc
}

func newProblemCollector(l *problemLog) *problemCollector {
	return &problemCollector{log: l, desc: prometheus.NewDesc("levee_setup_problem",
		"1 for each problem with how levee is set up (misuse the types cannot prevent), reported once and logged.",
		[]string{"problem"}, nil)}
}

func (c *problemCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *problemCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.log.list() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 1, p)
	}
}
