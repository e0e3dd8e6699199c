package admit

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/option"
)

// DefaultPeriod is the control period used when WithPeriod is not given.
const DefaultPeriod = 50 * time.Millisecond

// Option configures a Controller. An out-of-range value makes New panic
// (see the package documentation).
type Option func(*config)

type config struct {
	signals  []levee.Signal
	period   time.Duration
	route    func(ctx context.Context) string
	quotas   []tenantQuota
	seed     uint64
	degrade  *degrade.Controller
	observer func(Event)
	logger   *slog.Logger
	runWait  time.Duration // longest wait in the run queue; ≤ 0: no run queue
	runBound int           // fixed bound; ≤ 0: learned
	cores    func() int    // the cores the process may use; nil: GOMAXPROCS
	groups   PeerGroups
	tenants  TenantLimiter // consulted after quotas (fleetquota.go)
	dryRun   bool
}

type tenantQuota struct {
	tenant string
	q      Quota
}

// Limit is a token bucket: Rate tokens per second, at most Burst stored.
// Rate 0 means no limit; Burst 0 means max(1, Rate). A negative, NaN or
// infinite value makes WithQuota panic.
type Limit struct {
	Rate  float64
	Burst int
}

// Quota limits one named tenant. Rate and Burst bound all its requests
// together; ByCriticality (indexed by levee.Criticality) optionally adds a
// separate bucket per criticality, checked as well. A request over quota is
// rejected with Reason Quota and RetryAfter the time until a token is
// available.
type Quota struct {
	Rate          float64
	Burst         int
	ByCriticality [levee.NumCriticalities]Limit
}

// WithSignals sets the resource signals. A delay signal above its Target
// means overload; a utilisation (a signal with a Saturation method, such
// as pressure.CPU) above its Target means overload only when a delay
// signal sees work wait, or none is configured, or it stays above for 2 s
// (the package documentation, "How signals combine"). A signal with a
// Capacity() float64 method (pressure.Concurrency) watches a bottleneck:
// when it binds, an overload episode starts from the throughput it
// measures (or, until it has one, the rate tickets are done at), not from
// the capacity learned while the CPU bound. A signal with an Unread()
// float64 method (pressure.SchedLatency: goroutines waiting for a
// processor) counts demand the process has not read yet; while overloaded
// its growth is added to the arrival rate (see Snapshot.OfferedRPS). Nil
// signals are ignored. Without signals nothing is ever shed for overload (deadlines and quotas
// still apply).
func WithSignals(s ...levee.Signal) Option {
	return func(c *config) {
		for _, x := range s {
			if x != nil {
				c.signals = append(c.signals, x)
			}
		}
	}
}

// WithPeriod sets the control period at which Run calls Step. Default 50ms;
// range [1ms, 1m]; 0 means the default.
func WithPeriod(d time.Duration) Option {
	return func(c *config) {
		option.Set(&c.period, d, d >= time.Millisecond && d <= time.Minute, "admit", "WithPeriod", "must be in [1ms, 1m] (0 means the default, 50ms)")
	}
}

// WithRoute sets the function that names a request's route (for example the
// HTTP pattern or the gRPC method). The function is called on the accept
// path and should not allocate. Default (and nil): every request is one
// route.
//
// Service time is learned per route, in a table of 64 routes (a new route
// takes a free slot or one silent for a minute; beyond that it is not
// checked), from successful tickets only, from the start of service
// (Admit, the end of Ticket.Wait, or Ticket.Start) to Done, never from
// tickets marked Ticket.Exclude. What is learned is the 10th percentile,
// which one sample moves by at most 2% up or 17% down. A request is
// refused with Reason Deadline ("cannot meet") only on strong evidence:
// its time left is below that 10th percentile, backed by at least 16
// samples (10 s half-life), the latest less than 5 s old. Evidence that is
// not renewed lapses, and one refused request in 16 is admitted and
// measured as a probe, so a wrong estimate heals within seconds.
func WithRoute(f func(ctx context.Context) string) Option {
	return func(c *config) { c.route = f }
}

// WithQuota limits tenant to q. Later calls for the same tenant replace
// earlier ones; SetQuotas replaces them all at run time. The tenant must
// not be empty, and every Rate and Burst of q must be finite and ≥ 0 (see
// Limit).
func WithQuota(tenant string, q Quota) Option {
	return func(c *config) {
		option.Check(quotaProblem(tenant, q) == "", "admit", "WithQuota", quotaProblem(tenant, q), tenant, q)
		for i := range c.quotas {
			if c.quotas[i].tenant == tenant {
				c.quotas[i].q = q
				return
			}
		}
		c.quotas = append(c.quotas, tenantQuota{tenant, q})
	}
}

// quotaProblem says what is wrong with tenant's quota q, or "" if
// nothing is.
func quotaProblem(tenant string, q Quota) string {
	if tenant == "" {
		return "the tenant must not be empty"
	}
	if p := limitProblem(Limit{q.Rate, q.Burst}); p != "" {
		return p
	}
	for cr, l := range q.ByCriticality {
		if p := limitProblem(l); p != "" {
			return "ByCriticality[" + levee.Criticality(cr).String() + "]." + p
		}
	}
	return ""
}

func limitProblem(l Limit) string {
	switch {
	case !(l.Rate >= 0) || math.IsInf(l.Rate, 0):
		return "Rate must be finite and ≥ 0 (0 means no limit)"
	case l.Burst < 0:
		return "Burst must be ≥ 0 (0 means max(1, Rate))"
	}
	return ""
}

// WithDryRun starts the Controller in dry-run when on (see SetDryRun).
// Default off.
func WithDryRun(on bool) Option {
	return func(c *config) { c.dryRun = on }
}

// WithSeed sets the seed of the counter-based fractions that decide which
// requests of a partly shed class are rejected. The same seed and the same
// sequence of calls give the same decisions. Default 0.
func WithSeed(seed uint64) Option {
	return func(c *config) { c.seed = seed }
}

// WithDegrade sets the degradation controller the Controller steps with its
// load. Default (and nil): degrade.New().
func WithDegrade(d *degrade.Controller) Option {
	return func(c *config) {
		if d != nil {
			c.degrade = d
		}
	}
}

// WithObserver sets a function called with every state change (overload
// start and end, degradation level change, drills, no-retry). It is called
// from Step only, never per request, and must not call back into Step.
// Default (and nil): none.
func WithObserver(f func(Event)) Option {
	return func(c *config) { c.observer = f }
}

// DefaultRunWait is the longest a request waits in the run queue by
// default (see WithRunQueue).
const DefaultRunWait = 500 * time.Millisecond

// WithRunQueue sets the longest time a request may wait in the run queue
// (Ticket.Wait) before it is rejected as Overloaded. Default
// DefaultRunWait; range [0, 1h]; 0 turns the run queue off, and Wait then
// never waits.
//
// The run queue bounds how many admitted requests run at once while the
// server is busy (a signal at half its target or more, or shedding, or
// degraded); below that it is off and Wait costs one atomic load. The
// bound is learned while the server is busy but healthy (below target,
// nothing shed): twice the number of requests that run at once, scaled to
// the signal at its target, and never below 2×GOMAXPROCS or 4. It grows by a
// quarter each period in which requests wait while the signals read below
// 0.8 of target (a slower dependency needs more requests in flight, not
// fewer). A CPU-bound handler longer than Go's 10 ms time slice is where
// it matters: without a bound, twenty such requests admitted at once on
// one core all finish together 400 ms later, and the control loop's own
// goroutines wait behind them; with it, the excess waits parked, in
// order, and leaves when its caller goes away. A queue that stands (its
// oldest waiter older than 10 ms at two Steps in a row, CoDel's test)
// serves its newest waiter first and lets a wait last 100 ms at most
// (adaptive LIFO, as Facebook's servers do): the requests that run are
// those with time left, and the standing wait of long requests stays
// short. Not while a signal says the queue absorbs a burst
// (pressure.QueueDelay's Bursting: a queue that rose while nothing was
// shed, within what the callers' deadlines allow): then it stays first
// come, first served, with this wait.
func WithRunQueue(d time.Duration) Option {
	return func(c *config) {
		option.Check(d >= 0 && d <= time.Hour, "admit", "WithRunQueue", "must be in [0, 1h] (0 turns the run queue off)", d)
		c.runWait = d
	}
}

// WithRunBound fixes the run queue's bound at n requests running at once,
// always on, instead of learning it: for a service that knows its shape,
// such as CPU-bound handlers on GOMAXPROCS cores. Range [0, 1e6]; 0 means
// the default, the learned bound. It has no effect with WithRunQueue(0).
func WithRunBound(n int) Option {
	return func(c *config) {
		option.Check(n >= 0 && n <= 1e6, "admit", "WithRunBound", "must be in [0, 1e6] (0 means the learned bound)", n)
		c.runBound = n
	}
}

// WithCores sets the function returning how many cores the process may
// use, read every period. Default runtime.GOMAXPROCS(0), which Go keeps
// at a container's CPU limit as that changes. The run queue's learned
// bound never falls below it (nor below 4 or twice the cores while it
// learns), and demand waiting unread (a backlog signal's Unread) counts
// as the process falling behind above 16 requests a core. A controller
// for another process than this one — a simulated instance — passes
// that process's cores. nil restores the default.
func WithCores(f func() int) Option {
	return func(c *config) { c.cores = f }
}

// PeerGroups says which address prefixes may count as one tenant (see
// WithPeerGroups).
type PeerGroups uint8

// Prefix groups.
const (
	// GroupIPv6Site groups the IPv6 /64s of one /48: one site, one
	// customer of an ISP. On by default.
	GroupIPv6Site PeerGroups = 1 << iota
	// GroupIPv6ISP also groups the /48s of one /32, an ISP's allocation.
	GroupIPv6ISP
	// GroupIPv4 groups the IPv4 /24s of one /16.
	GroupIPv4
	// DefaultPeerGroups is what New uses: sites only.
	DefaultPeerGroups = GroupIPv6Site
)

// WithPeerGroups sets which prefixes of untrusted callers' addresses
// (levee.Call.Peer) may count as one tenant. A prefix is grouped only when
// its tenants together send more than the fair share computed with it
// counted as one (hierarchical heavy hitters), so that a caller spread over
// many addresses of one network is one tenant, not thousands that shrink
// everyone's fair share. The default, DefaultPeerGroups, groups IPv6 /64s
// into their /48. An ISP's allocation (IPv6 /32, IPv4 /16) holds thousands
// of honest small tenants that together easily send more than one fair
// share: GroupIPv6ISP and GroupIPv4 group those too, for services whose
// callers are organisations rather than consumers. 0 groups nothing (an
// exception to the zero-means-default convention: "none" is a setting);
// GroupIPv6ISP implies GroupIPv6Site; other bits make New panic.
func WithPeerGroups(g PeerGroups) Option {
	return func(c *config) {
		option.Check(g&^(GroupIPv6Site|GroupIPv6ISP|GroupIPv4) == 0, "admit", "WithPeerGroups",
			"must combine GroupIPv6Site, GroupIPv6ISP and GroupIPv4 (0 groups nothing)", uint8(g))
		if g&GroupIPv6ISP != 0 {
			g |= GroupIPv6Site
		}
		c.groups = g
	}
}

// WithLogger sets the logger state changes are logged to, once each, never
// per request. Default (and nil): no logging, but for two lines an
// operator must see, which then go to slog.Default(): that Run is
// missing (once), and in dry-run what would be rejected (at most once a
// second).
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.logger = l }
}

// SignalState is one signal's reading at the last Step. Value is NaN
// while the signal has no reading; JSON encodes a NaN or infinite Value or
// Target as null.
type SignalState struct {
	Name          string
	Value, Target float64
}

// MarshalJSON encodes s with a NaN or infinite Value or Target as null:
// encoding/json refuses such floats, and a Snapshot taken before the
// first samples holds them.
func (s SignalState) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name          string
		Value, Target *float64
	}{s.Name, finiteOrNil(s.Value), finiteOrNil(s.Target)})
}

func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Load returns the signal's load, Value ÷ Target (1.0 = at target), or NaN
// when it has no reading (Value NaN) or no valid target (Target ≤ 0 or
// NaN): such a signal counts for nothing in the Controller's load.
func (s SignalState) Load() float64 {
	if math.IsNaN(s.Value) || !(s.Target > 0) {
		return math.NaN()
	}
	return s.Value / s.Target
}

// Snapshot is the Controller's state for metrics, status pages and reports.
// Counters are cumulative since New.
type Snapshot struct {
	// Time of the last Step.
	Time time.Time
	// Overloaded reports whether the controller is in an overload episode:
	// from the Step that started shedding (see "How signals combine" in
	// signals.go) until nothing has been shed for 500 ms.
	Overloaded bool
	// Load is the maximum over signals of value ÷ target (1.0 = at target).
	Load float64
	// ShedLevel: 0 nothing shed … 4 everything shed; the integer part is the
	// number of criticalities fully shed (from Sheddable up), the fraction
	// the share shed of the next one.
	ShedLevel float64
	// AdmitFraction is the share of overload-eligible demand the controller
	// currently lets through (1 = no shedding).
	AdmitFraction float64
	// DegradeLevel is the degradation level in force.
	DegradeLevel degrade.Level
	// Signals holds each signal's last reading.
	Signals []SignalState
	// Admitted counts admitted requests per criticality (indexed by
	// levee.Criticality).
	Admitted [levee.NumCriticalities]uint64
	// Rejected counts rejections per criticality and levee.Reason.
	Rejected [levee.NumCriticalities][levee.NumReasons]uint64
	// Shed counts the overload rejections, Rejected[cr][levee.Overloaded],
	// by the Stage that decided them (index 0 unused; the stages add up to
	// Rejected[cr][levee.Overloaded]).
	Shed [levee.NumCriticalities][NumStages]uint64
	// DownstreamOverloaded counts tickets finished with a downstream
	// *levee.RejectedError of Reason Overloaded.
	DownstreamOverloaded uint64
	// ShedSeconds and DegradedSeconds are the cumulative times spent
	// shedding and at a degradation level above 0.
	ShedSeconds, DegradedSeconds float64
	// RetryShare is the recent share of requests that were retries
	// (levee.Call.Attempt ≥ 1).
	RetryShare float64
	// NoRetry reports whether overload rejections currently say "don't
	// retry" (RetryShare above twice the default retry budget ratio).
	NoRetry bool
	// RetryAfter is the advice given with Sheddable overload rejections;
	// SheddablePlus gets a longer one.
	RetryAfter time.Duration
	// CapacityRPS estimates the admitted rate at which the signals sit at
	// their targets.
	CapacityRPS float64
	// OfferedRPS is the smoothed rate of requests that reached the
	// overload stage (past deadline and quota checks), and while
	// overloaded those waiting unread (WithSignals: a signal's Unread)
	// when they arrived, not when they were read.
	OfferedRPS float64
	// FairShareRPS is the per-tenant fair share (capacity ÷ active tenants)
	// and ActiveTenants the estimated number of tenants seen over the last
	// 5–10 s, a grouped prefix counting as one (see WithPeerGroups);
	// TenantGroups is the number of prefixes grouped.
	FairShareRPS  float64
	ActiveTenants int
	TenantGroups  int
	// TenantShedRPS is the rate at which requests of tenants far above
	// their fair share were rejected by the tenant stage in the last
	// period: measured, not planned.
	TenantShedRPS float64
	// CallerGone counts tickets finished with a context error (the caller
	// gave up while the work ran).
	CallerGone uint64
	// Routes is the number of routes whose service time is being learned.
	Routes int
	// Running and Waiting are the requests holding a run-queue slot and
	// waiting for one, read now; RunBound is the bound in force at the
	// last Step (0: the run queue is off or has not learned a bound).
	Running, Waiting, RunBound int
	// DryRun reports whether the controller is in dry-run (SetDryRun),
	// read now: every decision computed, nothing rejected.
	DryRun bool
	// WouldReject counts, per criticality and levee.Reason, the requests
	// admitted in dry-run that would otherwise have been rejected
	// (cumulative since New, read now); Rejected does not count them, and
	// Admitted does.
	WouldReject [levee.NumCriticalities][levee.NumReasons]uint64
	// WouldShedRPS is, in dry-run, the rate the plan of the last Step
	// would shed (requests per second): offered minus the capacity
	// estimate frozen before the overload, or more under a forced shed
	// level. 0 outside dry-run.
	WouldShedRPS float64
	// ForcedShed is the shed level forced by ForceShed (a drill) in force
	// at the last Step, 0 when none; ForcedShedUntil is when it ends (zero
	// when none). OverloadShed and OverloadShedUntil are the same for the
	// overload manager's floor (OverloadShed). ShedLevel is at least the
	// higher of the two.
	ForcedShed        float64
	ForcedShedUntil   time.Time
	OverloadShed      float64
	OverloadShedUntil time.Time
}

// EventKind says what changed.
type EventKind uint8

// Event kinds.
const (
	// OverloadStart: a signal went above its target and shedding began.
	OverloadStart EventKind = iota + 1
	// OverloadEnd: nothing was shed for 500ms and the load is below 0.95.
	OverloadEnd
	// DegradeChanged: the degradation level in force changed.
	DegradeChanged
	// DrillStart and DrillEnd: a forced degradation level (degrade.Force)
	// began or expired.
	DrillStart
	DrillEnd
	// NoRetryStart and NoRetryEnd: overload rejections began or stopped
	// saying "don't retry" because of the share of retried requests.
	NoRetryStart
	NoRetryEnd
	// ForcedShedStart and ForcedShedEnd: a shed level forced by
	// ForceShed came into force at a Step, or ended (expired or
	// cleared). A floor renewed before it expires is one drill. An
	// overload manager's floor (OverloadShed) has no events here: the
	// manager reports its own.
	ForcedShedStart
	ForcedShedEnd
)

var eventNames = [...]string{"", "overload_start", "overload_end", "degrade_changed", "drill_start", "drill_end", "no_retry_start", "no_retry_end",
	"forced_shed_start", "forced_shed_end"}

// String returns a snake_case name such as "overload_start".
func (k EventKind) String() string {
	if int(k) < len(eventNames) && k != 0 {
		return eventNames[k]
	}
	return "unknown"
}

// Event is a state change reported to the observer, with the Snapshot at
// the Step that saw it.
type Event struct {
	Time     time.Time
	Kind     EventKind
	Snapshot Snapshot
}
