package config

import (
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/overload"
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
	// Overload configures the overload manager (package overload): what
	// the process does, beyond rejecting, as its memory, GC share,
	// goroutines or descriptors near their limits.
	Overload Overload `yaml:"overload"`
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

// Overload configures the overload manager (package overload), which
// leveehttp.Protect builds from the memory, gc_cpu, goroutines and
// open_files signals of the signals section. While it is enabled those
// signals drive the manager and admission control reads only cpu,
// sched_latency, queue_delay and concurrency: a limit's signal lags
// admission and is no rate to steer by (with memory also in admission at
// its target 0.8, admission would hold memory at 0.8 and serve less than
// what fits), so the manager acts on it with its own rules: a shed floor,
// a cap on the requests in flight, keep-alive off, short timeouts, and at
// the last level only CRITICAL_PLUS and health probes. Disabled, admission
// reads every signal, as before the manager. Everything but enabled and
// period changes while the service runs.
type Overload struct {
	// Enabled builds the manager. Default true.
	Enabled bool `yaml:"enabled" reload:"restart"`
	// Period is how often the manager steps; the state of a step lasts
	// 3 periods (at least 300ms) without another. Default 100ms; range
	// [10ms, 10s].
	Period time.Duration `yaml:"period" reload:"restart"`
	// Resources holds the thresholds of each resource; a resource whose
	// signal the signals section leaves out (goroutines without a limit)
	// does not exist.
	Resources OverloadResources `yaml:"resources"`
	// Actions holds the level each action starts at and its cooldown.
	Actions OverloadActions `yaml:"actions"`
	// ShedFloors is the admission controller's shed level (0 none … 4
	// everything; 1 = every SHEDDABLE request) the shed action holds at
	// least, at each level. Defaults 1, 2, 3; each in [0, 4], not
	// descending.
	ShedFloors ShedFloors `yaml:"shed_floors"`
	// BodyLimit is the largest declared request body, in bytes, the
	// large_bodies action lets through (an undeclared length is refused
	// too). Default 1048576 (1 MiB); range [1, 1 TiB].
	BodyLimit int64 `yaml:"body_limit"`
	// IdleTimeout and HeaderTimeout are the short_timeouts action's: how
	// long a connection may wait for a request's first byte, then for the
	// rest of its head. Defaults 1s and 2s; range [10ms, 1h].
	IdleTimeout   time.Duration `yaml:"idle_timeout"`
	HeaderTimeout time.Duration `yaml:"header_timeout"`
	// InFlightShares is the share of the in_flight cap SHEDDABLE and
	// SHEDDABLE_PLUS requests may use (CRITICAL all of it, CRITICAL_PLUS
	// is not capped). Defaults 0.8 and 0.9; each in (0, 1], the first not
	// above the second.
	InFlightShares InFlightShares `yaml:"in_flight_shares"`
	// MinInFlight is the lowest the in_flight cap goes. Default 2; range
	// [1, 1000000].
	MinInFlight int `yaml:"min_in_flight"`
}

// OverloadResources holds each resource's thresholds
// (overload.WithThresholds).
type OverloadResources struct {
	// Memory: the fraction of GOMEMLIMIT or the cgroup limit in use.
	// Defaults 0.92, 0.95, 0.98, margin 0.04, goal 0.9.
	Memory Thresholds `yaml:"memory"`
	// GCCPU: the garbage collector's share of the CPU. Defaults 0.4,
	// 0.45, 0.5, margin 0.05, goal 0 (it does not grow with the requests
	// in flight).
	GCCPU Thresholds `yaml:"gc_cpu"`
	// Goroutines: live goroutines against signals.goroutines.limit.
	// Defaults 0.9, 0.95, 0.98, margin 0.04, goal 0.85.
	Goroutines Thresholds `yaml:"goroutines"`
	// OpenFiles: open descriptors against RLIMIT_NOFILE. Defaults 0.7,
	// 0.85, 0.95, margin 0.05, goal 0.
	OpenFiles Thresholds `yaml:"open_files"`
}

// Thresholds are the readings at which a resource puts the process at
// each level (see overload.Resource).
type Thresholds struct {
	// Elevated, High and Critical are entered at these readings; each in
	// [0, 1], 0 never reached, the others not descending.
	Elevated float64 `yaml:"elevated"`
	High     float64 `yaml:"high"`
	Critical float64 `yaml:"critical"`
	// Margin is the hysteresis: a level is left below its threshold less
	// the margin. Range (0, 0.5].
	Margin float64 `yaml:"margin"`
	// Goal, when above 0, caps the requests in flight at what holds the
	// reading at the goal (the in_flight action); 0: none. Range [0, 1].
	Goal float64 `yaml:"goal"`
}

// OverloadActions configures each action (see overload.Action).
type OverloadActions struct {
	// Shed raises the admission controller's shed level to shed_floors.
	// Default elevated, cooldown 1s.
	Shed OverloadAction `yaml:"shed"`
	// LargeBodies refuses requests with a body above body_limit or of
	// undeclared length. Default elevated, 1s.
	LargeBodies OverloadAction `yaml:"large_bodies"`
	// InFlight caps the requests in flight where a resource's goal lies.
	// Default normal (whenever a resource sets a cap), 1s.
	InFlight OverloadAction `yaml:"in_flight"`
	// KeepAliveOff turns HTTP keep-alive off. Default high, 5s.
	KeepAliveOff OverloadAction `yaml:"keep_alive_off"`
	// ShortTimeouts shortens idle and header timeouts. Default high, 5s.
	ShortTimeouts OverloadAction `yaml:"short_timeouts"`
	// CriticalOnly refuses every request but CRITICAL_PLUS (health
	// probes are never refused). Default critical, 1s.
	CriticalOnly OverloadAction `yaml:"critical_only"`
	// Collect forces a garbage collection when the heap reading is
	// stale. Default high, 0s.
	Collect OverloadAction `yaml:"collect"`
}

// OverloadAction is one action's level and cooldown.
type OverloadAction struct {
	// Level is the level the action starts at: off (never), normal,
	// elevated, high or critical.
	Level overload.Level `yaml:"level"`
	// Cooldown is how long the level must stay below Level before the
	// action ends. Range [0, 10m].
	Cooldown time.Duration `yaml:"cooldown"`
}

// ShedFloors are the shed action's levels at Elevated, High and Critical.
type ShedFloors struct {
	Elevated float64 `yaml:"elevated"`
	High     float64 `yaml:"high"`
	Critical float64 `yaml:"critical"`
}

// InFlightShares are the shares of the in_flight cap of the two lowest
// criticalities.
type InFlightShares struct {
	Sheddable     float64 `yaml:"sheddable"`
	SheddablePlus float64 `yaml:"sheddable_plus"`
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
		Overload: Overload{
			Enabled: true,
			Period:  overload.DefaultPeriod,
			Resources: OverloadResources{
				Memory:     Thresholds{Elevated: 0.92, High: 0.95, Critical: 0.98, Margin: 0.04, Goal: 0.9},
				GCCPU:      Thresholds{Elevated: 0.4, High: 0.45, Critical: 0.5, Margin: 0.05},
				Goroutines: Thresholds{Elevated: 0.9, High: 0.95, Critical: 0.98, Margin: 0.04, Goal: 0.85},
				OpenFiles:  Thresholds{Elevated: 0.7, High: 0.85, Critical: 0.95, Margin: 0.05},
			},
			Actions: OverloadActions{
				Shed:          OverloadAction{overload.Elevated, time.Second},
				LargeBodies:   OverloadAction{overload.Elevated, time.Second},
				InFlight:      OverloadAction{overload.Normal, time.Second},
				KeepAliveOff:  OverloadAction{overload.High, 5 * time.Second},
				ShortTimeouts: OverloadAction{overload.High, 5 * time.Second},
				CriticalOnly:  OverloadAction{overload.Critical, time.Second},
				Collect:       OverloadAction{overload.High, 0},
			},
			ShedFloors:     ShedFloors{Elevated: 1, High: 2, Critical: 3},
			BodyLimit:      1 << 20,
			IdleTimeout:    time.Second,
			HeaderTimeout:  2 * time.Second,
			InFlightShares: InFlightShares{Sheddable: 0.8, SheddablePlus: 0.9},
			MinInFlight:    2,
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
