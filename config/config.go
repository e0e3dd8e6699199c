package config

import (
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// Version is the file format this package reads: a file says `version: 1`.
const Version = 1

// Config is levee's whole configuration: what the file says, over the
// defaults, under the environment. Every field is explicit: Default returns
// the defaults filled in, Load and Parse decode a file on top of them, so
// that the effective configuration (what the admin endpoint shows, what a
// diff compares) never hides a default behind a zero.
//
// Build one in code by starting from Default and changing fields; a zero
// Config fails Validate (its version is 0). A Config is a plain value: the
// Reloader never modifies one it has published, and neither should its
// readers.
//
// Fields tagged reload:"restart" cannot change while a service runs: a
// reload that changes one is rejected whole (restart to apply it).
type Config struct {
	// Version of the file format; must be 1.
	Version int `yaml:"version" reload:"restart"`
	// Admit configures the admission controller (package admit).
	Admit Admit `yaml:"admit"`
	// Signals configures the resource signals (package pressure).
	Signals Signals `yaml:"signals"`
	// Degrade configures the degradation levels (package degrade).
	Degrade Degrade `yaml:"degrade"`
	// HTTP configures the server side for net/http and gRPC: health paths,
	// trusted networks, route rules, the paths levee serves itself.
	HTTP HTTP `yaml:"http"`
	// Admin configures the admin endpoint (leveehttp.Admin).
	Admin Admin `yaml:"admin"`
	// Reload configures how the Reloader notices a changed file.
	Reload Reload `yaml:"reload"`
	// Client configures the client side: retries, retry budget, adaptive
	// throttling.
	Client Client `yaml:"client"`

	// Sections holds the sections registered with WithSection, by name:
	// each value is the pointer the section's constructor returned, decoded
	// from the file. Packages outside the core (fleet quotas, the proxy)
	// keep their configuration here.
	Sections map[string]any `yaml:"-"`
}

// Admit configures the admission controller.
type Admit struct {
	// DryRun computes every decision and rejects nothing: would-be
	// rejections are counted and logged (admit's dry-run). Default false.
	DryRun bool `yaml:"dry_run"`
	// Period is the control period (admit.WithPeriod). Default 50ms; range
	// [1ms, 10s].
	Period time.Duration `yaml:"period" reload:"restart"`
	// Seed seeds the shedding fractions (admit.WithSeed). Default 0.
	Seed uint64 `yaml:"seed" reload:"restart"`
	// RunQueue bounds the admitted requests running at once.
	RunQueue RunQueue `yaml:"run_queue" reload:"restart"`
	// Quotas limits named tenants (admit.WithQuota), by tenant id as the
	// wire carries it (ids longer than 64 bytes or not plain ASCII are
	// matched by their hashed form, as leveehttp derives it). Default none.
	Quotas map[string]Quota `yaml:"quotas"`
}

// RunQueue configures admit's run queue (admit.WithRunQueue,
// admit.WithRunBound).
type RunQueue struct {
	// MaxWait is the longest a request waits for a run slot; 0 turns the
	// run queue off. Default 500ms; range [0, 1m].
	MaxWait time.Duration `yaml:"max_wait"`
	// Bound fixes the number of requests running at once; 0 learns it.
	// Default 0; range [0, 1000000].
	Bound int `yaml:"bound"`
}

// Quota limits one tenant: Rate requests per second with bursts of Burst
// over all its requests, and optionally a separate bucket per criticality.
type Quota struct {
	// Rate in requests per second; 0 means no overall limit. Range [0, 1e9].
	Rate float64 `yaml:"rate"`
	// Burst is the bucket depth; 0 means max(1, Rate). Range [0, 1e9].
	Burst int `yaml:"burst"`
	// ByCriticality adds a bucket per criticality, keyed by its wire name
	// (CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE) or number 4..1.
	ByCriticality map[levee.Criticality]Limit `yaml:"by_criticality"`
}

// Limit is a token bucket: Rate per second, at most Burst stored.
type Limit struct {
	// Rate in requests per second; 0 means no limit. Range [0, 1e9].
	Rate float64 `yaml:"rate"`
	// Burst is the bucket depth; 0 means max(1, Rate). Range [0, 1e9].
	Burst int `yaml:"burst"`
}

// Signals configures the resource signals of pressure.Default, one
// section per signal; what a section does not say stays Default's (see
// Signals.Set).
type Signals struct {
	CPU          CPU          `yaml:"cpu"`
	SchedLatency SchedLatency `yaml:"sched_latency"`
	QueueDelay   QueueDelay   `yaml:"queue_delay"`
	Concurrency  Concurrency  `yaml:"concurrency"`
	// Memory configures the memory signal (pressure.NewMemory): the
	// fraction of GOMEMLIMIT or the cgroup limit in use, no reading
	// without a limit. Defaults: target 0.8, period 100ms, smoothing 0.
	Memory LimitSignal `yaml:"memory"`
	// GCCPU configures the GC CPU signal (pressure.NewGCCPU): the GC's
	// share of the CPU. Defaults: target 0.3, period 100ms, smoothing 1s.
	GCCPU LimitSignal `yaml:"gc_cpu"`
	// Goroutines configures the goroutine signal (pressure.NewGoroutines).
	Goroutines Goroutines `yaml:"goroutines"`
	// OpenFiles configures the open file descriptor signal
	// (pressure.NewOpenFiles): descriptors in use against RLIMIT_NOFILE.
	// Defaults: target 0.8, period 1s, smoothing 0.
	OpenFiles LimitSignal `yaml:"open_files"`
}

// CPU configures the CPU signal (pressure.NewCPU).
type CPU struct {
	// Enabled includes the signal. Default true.
	Enabled bool `yaml:"enabled" reload:"restart"`
	// Target in fraction of the allowed cores. Default 0.95; range (0, 2].
	Target float64 `yaml:"target"`
	// Period between samples. Default 50ms; range [10ms, 1m].
	Period time.Duration `yaml:"period" reload:"restart"`
	// Smoothing is the EWMA time constant; 0 is none. Default 50ms; range
	// [0, 1m].
	Smoothing time.Duration `yaml:"smoothing" reload:"restart"`
	// RunQueueWait adds the time the process's threads waited for a core
	// (pressure.WithRunQueueWait). Default false.
	RunQueueWait bool `yaml:"run_queue_wait" reload:"restart"`
}

// SchedLatency configures the Go scheduler latency signal
// (pressure.NewSchedLatency).
type SchedLatency struct {
	// Enabled includes the signal. Default true.
	Enabled bool `yaml:"enabled" reload:"restart"`
	// Target latency. Default 50ms; range (0, 10s].
	Target time.Duration `yaml:"target"`
	// Percentile of each period's histogram. Default 0.99; range (0, 1].
	Percentile float64 `yaml:"percentile" reload:"restart"`
	// Period between samples. Default 50ms; range [10ms, 1m].
	Period time.Duration `yaml:"period" reload:"restart"`
	// Smoothing is the EWMA time constant; 0 is none. Default 50ms; range
	// [0, 1m].
	Smoothing time.Duration `yaml:"smoothing" reload:"restart"`
}

// QueueDelay configures the queueing delay signal (pressure.NewQueueDelay).
type QueueDelay struct {
	// Enabled includes the signal. Default true.
	Enabled bool `yaml:"enabled" reload:"restart"`
	// Target standing-queue delay. Default 0: learned from the CPU per
	// request (see pressure.QueueDelay); range [0, 1m].
	Target time.Duration `yaml:"target"`
	// Interval over which the minimum is taken. Default 100ms; range
	// [10ms, 1m].
	Interval time.Duration `yaml:"interval" reload:"restart"`
	// Smoothing is an EWMA time constant over the minima; 0 is none.
	// Default 0; range [0, 1m].
	Smoothing time.Duration `yaml:"smoothing" reload:"restart"`
	// TargetFloor and TargetCeiling bound the learned target
	// (pressure.WithQueueBounds); a fixed Target is not bounded by them.
	// Defaults 5ms and 1s; range 0 < target_floor ≤ target_ceiling ≤ 1m.
	TargetFloor   time.Duration `yaml:"target_floor" reload:"restart"`
	TargetCeiling time.Duration `yaml:"target_ceiling" reload:"restart"`
}

// Concurrency configures the signal of requests waiting inside the
// handler (pressure.NewConcurrency). Its target is fixed at 1 (waiting as
// allowed); what it allows follows from the fields below. None of them
// changes while the service runs.
type Concurrency struct {
	// Enabled includes the signal. Default true. It reads nothing until
	// the request path reports to it (see pressure.Set).
	Enabled bool `yaml:"enabled" reload:"restart"`
	// LatencyRatio is the in-handler latency, as a multiple of the learned
	// no-wait service time, at which the signal reads its target
	// (pressure.WithLatencyRatio). Default 2; range [1.2, 100].
	LatencyRatio float64 `yaml:"latency_ratio" reload:"restart"`
	// LatencyFloor and LatencyCeiling bound the latency target
	// (pressure.WithLatencyBounds). Defaults 1ms and 10s; range
	// 0 < latency_floor ≤ latency_ceiling ≤ 1h.
	LatencyFloor   time.Duration `yaml:"latency_floor" reload:"restart"`
	LatencyCeiling time.Duration `yaml:"latency_ceiling" reload:"restart"`
	// MinQueue is the smallest number of waiting requests read as the
	// target (pressure.WithMinQueue). Default 4; range [1, 1000000].
	MinQueue int `yaml:"min_queue" reload:"restart"`
	// Period between samples. Default 50ms; range [10ms, 1m].
	Period time.Duration `yaml:"period" reload:"restart"`
	// Smoothing is the EWMA time constant; 0 is none. Default 100ms;
	// range [0, 1m].
	Smoothing time.Duration `yaml:"smoothing" reload:"restart"`
}

// LimitSignal configures a signal that reads the fraction of a limit in
// use (memory, gc_cpu, open_files). The defaults differ per signal: see
// the fields of Signals.
type LimitSignal struct {
	// Enabled includes the signal. Default true.
	Enabled bool `yaml:"enabled" reload:"restart"`
	// Target in fraction of the limit; range (0, 1].
	Target float64 `yaml:"target"`
	// Period between samples; range [10ms, 1m].
	Period time.Duration `yaml:"period" reload:"restart"`
	// Smoothing is the EWMA time constant; 0 is none. Range [0, 1m].
	Smoothing time.Duration `yaml:"smoothing" reload:"restart"`
}

// Goroutines configures the goroutine signal: live goroutines against a
// ceiling the service is sized for (pressure.WithGoroutineLimit). Its
// sampling period (100ms) and smoothing (none) are pressure's.
type Goroutines struct {
	// Limit is the ceiling; 0 leaves the signal out (there is no natural
	// one). Default 0; range [0, 1e9].
	Limit int `yaml:"limit" reload:"restart"`
	// Target in fraction of Limit. Default 0.9; range (0, 1].
	Target float64 `yaml:"target"`
}

// Degrade configures the degradation levels (package degrade).
type Degrade struct {
	// Target is the load (1.0 = admit's shedding point) at which level 1
	// is entered. Default 0.85; range (0, 1].
	Target float64 `yaml:"target"`
	// Hysteresis is how far below its entry load a level is left. Default
	// 0.05; range [0, 1].
	Hysteresis float64 `yaml:"hysteresis"`
	// Max is the highest level. Default 3; range [1, 100].
	Max int `yaml:"max"`
	// Hold is how long the load must stay low before a level is left.
	// Default 1s; range [0, 1h].
	Hold time.Duration `yaml:"hold"`
}

// HTTP configures the server adapters.
type HTTP struct {
	// HealthPaths are never shed and never counted (exact paths).
	// Default /healthz, /readyz, /livez.
	HealthPaths []string `yaml:"health_paths"`
	// TrustedNetworks are the client networks whose levee headers
	// (criticality above CRITICAL, tenant) are believed, as CIDRs or single
	// addresses. Default none: nobody is trusted.
	TrustedNetworks []Network `yaml:"trusted_networks"`
	// Routes name requests and set the criticality and tenant of untrusted
	// callers; the first rule that matches wins. Default none.
	Routes []Route `yaml:"routes"`
	// LoadHeader adds Levee-Load to every response. Default false.
	LoadHeader bool `yaml:"load_header"`
	// StatusPath is where the status page is served, outside admission.
	// Default /levee/status; "" serves none.
	StatusPath string `yaml:"status_path" reload:"restart"`
	// MetricsPath is where Prometheus metrics are served, outside
	// admission. Default /metrics; "" serves none.
	MetricsPath string `yaml:"metrics_path" reload:"restart"`
}

// Route is one route rule. A request matches when every condition given
// matches; a rule with no condition matches every request.
type Route struct {
	// Name is the route's name (admit.WithRoute learns service time per
	// route; metrics and logs use it). Required; at most 128 bytes.
	Name string `yaml:"name"`
	// Path matches the URL path: exactly, or, when it ends in "/", every
	// path below it (as http.ServeMux patterns do). "" matches every path.
	Path string `yaml:"path"`
	// Methods matches the request method (case-sensitive, as sent). Empty
	// matches every method.
	Methods []string `yaml:"methods"`
	// Headers matches header values exactly; the value "*" matches any
	// value of a header that is present.
	Headers map[string]string `yaml:"headers"`
	// Networks matches the client address.
	Networks []Network `yaml:"networks"`
	// Criticality is given to untrusted callers on this route (they may
	// still ask for less); "" keeps the default (CRITICAL, or what the
	// caller asks below it).
	Criticality string `yaml:"criticality"`
	// Tenant is the tenant of untrusted callers on this route; "" keeps
	// the default (TenantHeader, else the caller's network prefix).
	Tenant string `yaml:"tenant"`
	// TenantHeader names a header (an API key, say) whose value is the
	// tenant of untrusted callers on this route (hashed when long, as
	// Levee-Tenant is). Ignored when Tenant is set.
	TenantHeader string `yaml:"tenant_header"`
}

// Admin configures the admin endpoint (leveehttp.Admin). It is off by
// default, and even when mounted it answers 401 to a request that has
// neither the token nor an accepted client certificate.
type Admin struct {
	// Enabled mounts the endpoint (the one-call setup reads it). Default
	// false.
	Enabled bool `yaml:"enabled" reload:"restart"`
	// Path is the endpoint's prefix. Default /levee/admin.
	Path string `yaml:"path" reload:"restart"`
	// Token is the bearer token (at least 16 characters). Secret: shown
	// redacted.
	Token string `yaml:"token" config:"secret"`
	// TokenFile names a file holding the token (surrounding white space
	// trimmed), read at every load; it wins over Token.
	TokenFile string `yaml:"token_file"`
	// ClientCert accepts a verified TLS client certificate instead of the
	// token.
	ClientCert ClientCert `yaml:"client_cert"`
	// MaxDrill bounds the duration of a forced level. Default 1h; range
	// [1s, 24h].
	MaxDrill time.Duration `yaml:"max_drill"`
}

// ClientCert accepts mTLS clients on the admin endpoint.
type ClientCert struct {
	// Enabled accepts a request whose connection carries a client
	// certificate the server's tls.Config verified. Default false.
	Enabled bool `yaml:"enabled"`
	// Names, when not empty, restricts it to certificates one of whose
	// names (subject common name, DNS or URI SANs) is listed.
	Names []string `yaml:"names"`
}

// Reload configures the Reloader.
type Reload struct {
	// Poll is how often the file is checked for a change (modification
	// time, size, then content hash); 0 turns polling off. Default 5s;
	// range 0 or [100ms, 1h].
	Poll time.Duration `yaml:"poll"`
	// SIGHUP reloads the file when the process receives SIGHUP. Default
	// false (a library does not take over a signal unasked).
	SIGHUP bool `yaml:"sighup" reload:"restart"`
}

// Client configures levee's clients (leveehttp.NewTransport,
// leveegrpc.NewClient).
type Client struct {
	Retry    Retry    `yaml:"retry" reload:"restart"`
	Budget   Budget   `yaml:"budget" reload:"restart"`
	Throttle Throttle `yaml:"throttle"`
}

// Retry configures retry.Policy.
type Retry struct {
	// MaxAttempts counts attempts, the first included. Default 3; range
	// [1, 10].
	MaxAttempts int `yaml:"max_attempts"`
	// Base is the first retry's backoff ceiling. Default 100ms; range
	// [1ms, 1h].
	Base time.Duration `yaml:"base"`
	// Cap bounds every backoff. Default 10s; range [Base, 1h].
	Cap time.Duration `yaml:"cap"`
	// Multiplier is the ceiling's growth per retry. Default 2; range
	// [1, 10].
	Multiplier float64 `yaml:"multiplier"`
	// Jitter is "full" (default), "equal", "decorrelated" or "none".
	Jitter string `yaml:"jitter"`
	// AttemptTimeout bounds each attempt; 0 means none. Range [0, 24h].
	AttemptTimeout time.Duration `yaml:"attempt_timeout"`
	// Timeout bounds a call whose context has no deadline. Default 10s;
	// range [1ms, 24h].
	Timeout time.Duration `yaml:"timeout"`
}

// Budget configures retry.NewBudget.
type Budget struct {
	// Ratio of requests that may be retried over Window; 0 disables the
	// ratio part. Default 0.1; range [0, 1].
	Ratio float64 `yaml:"ratio"`
	// Window of the ratio. Default 10s; range [100ms, 1h].
	Window time.Duration `yaml:"window"`
	// Floor retries are allowed in any FloorWindow whatever the ratio.
	// Default 60; range [0, 100000].
	Floor int `yaml:"floor"`
	// FloorWindow is the floor's window. Default 1m; range [1s, 24h].
	FloorWindow time.Duration `yaml:"floor_window"`
}

// Throttle configures client-side adaptive throttling (package throttle).
type Throttle struct {
	// K: a client sends up to K times what the backend accepted. Default
	// 2; range [1, 100].
	K float64 `yaml:"k"`
	// Window is the long window. Default 2m; range [2.4s, 1h].
	Window time.Duration `yaml:"window" reload:"restart"`
	// Recovery is the recent horizon's time constant; 0 disables it.
	// Default 1s; range [0, 1m].
	Recovery time.Duration `yaml:"recovery" reload:"restart"`
}

// Default returns the defaults, the same as the packages' own: a service
// configured by Default behaves as one wired by hand with no options.
func Default() *Config {
	return &Config{
		Version: Version,
		Admit: Admit{
			Period:   admit.DefaultPeriod,
			RunQueue: RunQueue{MaxWait: admit.DefaultRunWait},
		},
		Signals: Signals{
			CPU:          CPU{Enabled: true, Target: 0.95, Period: 50 * time.Millisecond, Smoothing: 50 * time.Millisecond},
			SchedLatency: SchedLatency{Enabled: true, Target: 50 * time.Millisecond, Percentile: 0.99, Period: 50 * time.Millisecond, Smoothing: 50 * time.Millisecond},
			QueueDelay: QueueDelay{Enabled: true, Interval: 100 * time.Millisecond,
				TargetFloor: 5 * time.Millisecond, TargetCeiling: time.Second},
			Concurrency: Concurrency{Enabled: true, LatencyRatio: 2, LatencyFloor: time.Millisecond,
				LatencyCeiling: 10 * time.Second, MinQueue: 4, Period: 50 * time.Millisecond, Smoothing: 100 * time.Millisecond},
			Memory:     LimitSignal{Enabled: true, Target: 0.8, Period: 100 * time.Millisecond},
			GCCPU:      LimitSignal{Enabled: true, Target: 0.3, Period: 100 * time.Millisecond, Smoothing: time.Second},
			Goroutines: Goroutines{Target: 0.9},
			OpenFiles:  LimitSignal{Enabled: true, Target: 0.8, Period: time.Second},
		},
		Degrade: Degrade{
			Target:     degrade.DefaultTarget,
			Hysteresis: degrade.DefaultHysteresis,
			Max:        int(degrade.DefaultMax),
			Hold:       degrade.DefaultHold,
		},
		HTTP: HTTP{
			HealthPaths: []string{"/healthz", "/readyz", "/livez"},
			StatusPath:  "/levee/status",
			MetricsPath: "/metrics",
		},
		Admin:  Admin{Path: "/levee/admin", MaxDrill: time.Hour},
		Reload: Reload{Poll: 5 * time.Second},
		Client: Client{
			Retry: Retry{
				MaxAttempts: retry.DefaultMaxAttempts,
				Base:        retry.DefaultBase,
				Cap:         retry.DefaultCap,
				Multiplier:  retry.DefaultMultiplier,
				Jitter:      "full",
				Timeout:     retry.DefaultTimeout,
			},
			Budget:   Budget{Ratio: 0.1, Window: 10 * time.Second, Floor: 60, FloorWindow: time.Minute},
			Throttle: Throttle{K: throttle.DefaultK, Window: throttle.DefaultWindow, Recovery: throttle.DefaultRecovery},
		},
	}
}

// Section returns the registered section name (see WithSection), or nil.
func (c *Config) Section(name string) any {
	if c == nil {
		return nil
	}
	return c.Sections[name]
}
