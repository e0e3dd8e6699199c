package leveegrpc

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/peer"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/leveeprom"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// ProtectOption configures Protect.
type ProtectOption func(*protectConfig)

type protectConfig struct {
	http   []leveehttp.ProtectOption
	server []Option
	client []ClientOption
}

// WithConfigFile configures Protect from the file at path, under the
// LEVEE_* environment and opts, and follows its changes
// (leveehttp.WithConfigFile).
func WithConfigFile(path string, opts ...config.Option) ProtectOption {
	return WithProtectOptions(leveehttp.WithConfigFile(path, opts...))
}

// WithConfig configures Protect from cfg, a configuration built in code,
// under the LEVEE_* environment and opts (leveehttp.WithConfig).
func WithConfig(cfg *config.Config, opts ...config.Option) ProtectOption {
	return WithProtectOptions(leveehttp.WithConfig(cfg, opts...))
}

// WithProtectOptions passes options to the part Protect shares with
// leveehttp.Protect: the configuration, the logger, the registry, the
// admission controller's options (leveehttp.WithAdmitOptions), loops to
// run (leveehttp.WithRun), the status page.
func WithProtectOptions(opts ...leveehttp.ProtectOption) ProtectOption {
	return func(c *protectConfig) { c.http = append(c.http, opts...) }
}

// WithServerOptions adds options to the Server, after Protect's own
// (trust, exemptions, the queue-delay signal, the problem reporter):
// WithTenant, WithLoadReport, for example.
func WithServerOptions(opts ...Option) ProtectOption {
	return func(c *protectConfig) { c.server = append(c.server, opts...) }
}

// WithClientOptions adds options to the Client, after Protect's own (the
// configuration's retry policy and budget, its throttle group).
func WithClientOptions(opts ...ClientOption) ProtectOption {
	return func(c *protectConfig) { c.client = append(c.client, opts...) }
}

// Protected is a gRPC service protected by levee, built by Protect: the
// server options that install admission (ServerOptions), the dial options
// for its outgoing calls (DialOptions), and the HTTP side (HTTP: status
// page, metrics, admin endpoint) with the signals, the admission
// controller and the configuration running beside it until Close. Safe
// for concurrent use.
type Protected struct {
	http   *leveehttp.Protected
	server *Server
	client *Client
}

// Protect protects a gRPC service in one call:
//
//	p, err := leveegrpc.Protect(ctx)
//	...
//	srv := grpc.NewServer(p.ServerOptions()...)
//	go p.HTTP().ListenAndServe(":9090") // status page, metrics
//
// It builds and starts what leveehttp.Protect does (configuration,
// signals, admission controller with gRPC method names as routes,
// degradation, status page, metrics, admin endpoint) and a Server wired
// to it: the tap admits each call before it is decoded and stamps its
// arrival; the stats handler feeds the queue-delay signal with the wait
// before the call's goroutine starts; the interceptors make tap-admitted
// calls wait in the run queue (streams only while they start); callers in
// http.trusted_networks are trusted; the gRPC health service and the
// methods listed in http.health_paths ("/pkg.Service/Method") are never
// shed; the overload manager's gate (WithOverload) sits in the tap before
// admission, and its shed floor is the controller's. DialOptions give outgoing calls the configuration's retry policy,
// retry budget and adaptive throttles (client.*), whose metrics join the
// others. Misuse is reported once, as leveehttp.Protect reports it (a
// server without the tap or the stats handler, for example).
//
// When ctx is done, or on Close, everything Protect started stops; stop
// the gRPC server yourself (srv.GracefulStop) before.
func Protect(ctx context.Context, opts ...ProtectOption) (*Protected, error) {
	var pc protectConfig
	for _, o := range opts {
		if o != nil {
			o(&pc)
		}
	}
	p := &Protected{}
	var server atomic.Pointer[Server]
	probes := func() uint64 {
		if s := server.Load(); s != nil {
			return s.Probes()
		}
		return 0
	}
	hopts := append([]leveehttp.ProtectOption{leveehttp.WithProbes(probes)}, pc.http...)
	// Routes are methods; last, so that it wins over leveehttp's route.
	hopts = append(hopts, leveehttp.WithAdmitOptions(admit.WithRoute(Method)))
	hp, err := leveehttp.Protect(ctx, nil, hopts...)
	if err != nil {
		return nil, err
	}
	p.http = hp
	router := hp.Router()
	sopts := []Option{
		WithTrust(func(ctx context.Context) bool { return router.TrustedAddr(peerAddr(ctx)) }),
		WithExempt(func(method string) bool { return isHealth(method) || router.Health(method) }),
		WithProblemReporter(hp.Report),
	}
	if q := hp.Signals().Queue; q != nil {
		sopts = append(sopts, WithQueueDelay(q))
	}
	if c := hp.Signals().Concurrency; c != nil {
		sopts = append(sopts, WithConcurrency(c))
	}
	if o := hp.Overload(); o != nil {
		sopts = append(sopts, WithOverload(o.Manager()))
	}
	p.server = NewServer(hp.Controller(), append(sopts, pc.server...)...)
	server.Store(p.server)

	cfg := hp.Reloader().Current()
	policy := cfg.Client.Retry.Policy()
	policy.Budget = retry.NewBudget(cfg.Client.Budget.Options()...)
	group := throttle.NewGroup(cfg.Client.Throttle.Options()...)
	if err := hp.Reloader().Subscribe(config.ApplyThrottle(group)); err != nil {
		hp.Close()
		return nil, err
	}
	p.client = NewClient(append([]ClientOption{WithPolicy(policy), WithThrottle(group)}, pc.client...)...)
	throttles := leveeprom.NewThrottleCollector()
	throttles.AddGroup(group)
	if err := hp.Registry().Register(throttles); err != nil {
		hp.Close()
		return nil, err
	}
	if err := hp.Registry().Register(leveeprom.NewBudgetCollector(policy.Budget)); err != nil {
		hp.Close()
		return nil, err
	}
	return p, nil
}

// peerAddr returns the address of ctx's caller, the zero Addr when it has
// none (a Unix socket, an in-memory transport).
func peerAddr(ctx context.Context) netip.Addr {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return netip.Addr{}
	}
	switch a := p.Addr.(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	default:
		ap, err := netip.ParseAddrPort(p.Addr.String())
		if err != nil {
			return netip.Addr{}
		}
		return ap.Addr().Unmap()
	}
}

// ServerOptions returns the options that install the Server on a
// grpc.Server: tap, interceptors and stats handler (Server.ServerOptions).
func (p *Protected) ServerOptions() []grpc.ServerOption { return p.server.ServerOptions() }

// DialOptions returns the options that install the Client on an outgoing
// connection (Client.DialOptions).
func (p *Protected) DialOptions() []grpc.DialOption { return p.client.DialOptions() }

// Server returns the Server.
func (p *Protected) Server() *Server { return p.server }

// Client returns the Client.
func (p *Protected) Client() *Client { return p.client }

// HTTP returns the HTTP side: serve it (Serve, ListenAndServe) for the
// status page, the metrics and the admin endpoint, and find the
// controller, signals and configuration there.
func (p *Protected) HTTP() *leveehttp.Protected { return p.http }

// Controller returns the admission controller.
func (p *Protected) Controller() *admit.Controller { return p.http.Controller() }

// Close stops the HTTP side's server, if it serves, and everything Protect
// started, and waits for it. Stop the gRPC server first.
func (p *Protected) Close() error { return p.http.Close() }

// Shutdown is Close with a graceful end for the HTTP side's server
// (leveehttp.Protected.Shutdown).
func (p *Protected) Shutdown(ctx context.Context) error { return p.http.Shutdown(ctx) }
