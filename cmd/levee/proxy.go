package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/leveeprom"
	"github.com/levee-dev/levee/proxy"
	"github.com/levee-dev/levee/proxy/proxyprom"
)

type proxyCmd struct {
	Config    string `short:"c" required:"" type:"existingfile" placeholder:"FILE" help:"levee's configuration file with a proxy section (backends, balancing, health, retries); its admit, signals, http, admin and reload sections configure the edge."`
	LogFormat string `name:"log-format" default:"text" enum:"text,json" help:"Log format on stderr: text or json."`
	LogLevel  string `name:"log-level" default:"info" enum:"debug,info,warn,error" help:"Least level logged (debug logs every answer the proxy gives for a backend)."`
}

func (c *proxyCmd) logger(e *env) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(c.LogLevel))
	o := &slog.HandlerOptions{Level: lv}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(e.stderr, o))
	}
	return slog.New(slog.NewTextHandler(e.stderr, o))
}

// Run serves the proxy until e's context ends (SIGTERM, Ctrl-C), then
// drains: the readiness probe fails for drain.delay while requests are
// still served, then the server stops accepting and waits up to
// drain.timeout for the requests in flight.
func (c *proxyCmd) Run(e *env) error {
	log := c.logger(e)
	rl, err := config.Open(c.Config, proxy.WithSection(), config.WithLogger(log))
	if err != nil {
		return err // the loader's error names file, line and field
	}
	cfg := rl.Current()
	pc := proxy.FromConfig(cfg)

	// The edge: the proxy's own admission controller, on its own
	// resources. Its handlers wait on backends, not on its CPU, so the run
	// queue is off whatever admit.run_queue says.
	set, err := cfg.Signals.Set()
	if err != nil {
		return err
	}
	deg := degrade.New(cfg.Degrade.Options()...)
	events := leveeprom.NewEventCollector()
	ctl := admit.New(append(cfg.Admit.Options(),
		admit.WithSignals(set.Signals()...), admit.WithDegrade(deg), admit.WithRunQueue(0),
		admit.WithRoute(leveehttp.Route), admit.WithLogger(log), admit.WithObserver(events.Observe))...)
	router := config.NewRouter(cfg)

	reg := prometheus.NewRegistry()
	opts := []proxy.Option{
		proxy.WithController(ctl), proxy.WithRouter(router), proxy.WithLogger(log),
		proxy.WithHealthPaths(cfg.HTTP.HealthPaths...),
		proxy.WithHandlerOptions(leveehttp.WithLoadHeader(cfg.HTTP.LoadHeader)),
	}
	if set.Queue != nil {
		opts = append(opts, proxy.WithHandlerOptions(leveehttp.WithQueueDelay(set.Queue)))
	}
	if set.Concurrency != nil {
		// A backend that slows is waiting inside the proxy's handler.
		opts = append(opts, proxy.WithHandlerOptions(leveehttp.WithConcurrency(set.Concurrency)))
	}
	if p := cfg.HTTP.MetricsPath; p != "" {
		opts = append(opts, proxy.WithExempt(p, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	}
	statusCtx, stopStatus := context.WithCancel(context.Background())
	defer stopStatus()
	if p := cfg.HTTP.StatusPath; p != "" {
		opts = append(opts, proxy.WithExempt(p, leveehttp.StatusHandler(ctl,
			leveehttp.WithStatusContext(statusCtx), leveehttp.WithStatusTitle("levee proxy: edge admission"))))
	}
	var admin *leveehttp.Admin
	if cfg.Admin.Enabled {
		admin = leveehttp.NewAdmin(rl, leveehttp.WithAdminDegrade(deg), leveehttp.WithAdminShed(ctl), leveehttp.WithAdminLogger(log))
		opts = append(opts, proxy.WithExempt(admin.Prefix(), admin), proxy.WithExempt(strings.TrimSuffix(admin.Prefix(), "/")+"/", admin))
	}
	h, err := proxy.New(pc, opts...)
	if err != nil {
		return err
	}
	reg.MustRegister(events, leveeprom.NewAdmitCollector(ctl), proxyprom.NewCollector(h),
		leveeprom.NewConfigCollector(rl, admin))
	targets := []config.Target{config.ApplySignals(set), config.ApplyDegrade(deg), router,
		config.ApplyAdmission(ctl)} // dry-run and quotas at run time
	if err := rl.Subscribe(append(targets, h.ConfigTarget())...); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", pc.Listen)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext:       leveehttp.ConnContext,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	loops, stopLoops := context.WithCancel(context.Background())
	defer stopLoops()
	done := make(chan struct{})
	go func() {
		defer close(done)
		go set.Run(loops)
		go ctl.Run(loops)
		go rl.Run(loops)
		h.Run(loops)
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(leveehttp.Listener(ln)) }()
	log.Info("levee proxy: serving", "addr", ln.Addr().String(), "backends", len(h.Status().Backends), "config", c.Config)

	select {
	case err := <-served:
		stopLoops()
		<-done
		return fmt.Errorf("proxy: %w", err)
	case <-e.ctx.Done():
	}
	h.Drain()
	d := rl.Current()
	pd := proxy.FromConfig(d).Drain
	log.Info("levee proxy: draining", "delay", pd.Delay, "timeout", pd.Timeout)
	time.Sleep(pd.Delay)
	sctx, cancel := context.WithTimeout(context.Background(), pd.Timeout)
	defer cancel()
	err = srv.Shutdown(sctx)
	stopLoops()
	<-done
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("levee proxy: requests still in flight at the drain timeout", "err", err)
		_ = srv.Close()
	}
	log.Info("levee proxy: stopped")
	return nil
}
