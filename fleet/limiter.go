package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/pressure"
)

// Defaults of the Options.
const (
	DefaultPeriod = time.Second
	// DefaultLeaseTTL is how long a lease stays valid without a renewal:
	// three periods by default, so one failed exchange costs nothing.
	DefaultLeaseTTL = 3 * DefaultPeriod
	// defaultCost is the cost assumed of a request of a tenant, and of a
	// fleet, whose requests have not been measured yet.
	defaultCost = 0.001 // core-seconds
)

// Limiter holds this instance's share of every tenant's fleet-wide quota
// and meters what each tenant's requests cost. It implements
// admit.TenantLimiter: Allow is its accept path. Run exchanges usage and
// leases with a Store every period in the background.
//
// The model: each tenant has, on each instance, a GCRA bucket in CPU cost
// refilled at the instance's lease (cores). Allow admits a request while
// the bucket's debt is within the tenant's burst (less for sheddable
// criticalities) and charges the tenant's estimated cost per request at
// once; each period the meter's measured cost replaces the estimate (the
// difference is charged or refunded), so the bucket is charged, over time,
// exactly the measured cost. See the package documentation for how cost
// is measured and how the leases are shared.
//
// A Limiter is safe for concurrent use. Allow, Start, Span.End, Record and
// Charge take no lock and, once a tenant has been seen, do not allocate.
type Limiter struct {
	table atomic.Pointer[table]
	opts  options
	seed  maphash.Seed
	// cost per request assumed for tenants not measured yet, core-seconds
	// (float64 bits), and the period's CPU per second of handler wall time.
	avgCost atomic.Uint64
	ratio   atomic.Uint64

	mu sync.Mutex // serialises rounds, Update and Snapshot
	rs roundState
}

type options struct {
	instance    string
	period      time.Duration
	ttl         time.Duration
	timeout     time.Duration
	initialLive int
	cpu         func() (time.Duration, error)
	logger      *slog.Logger
}

// Option configures a Limiter.
type Option func(*options) error

// WithInstance names this instance in the store. It must be unique in the
// fleet, 1 to 200 bytes of printable ASCII without spaces, not "_".
// Default: hostname-pid-random.
func WithInstance(id string) Option {
	return func(o *options) error {
		if err := checkInstance(id); err != nil {
			return err
		}
		o.instance = id
		return nil
	}
}

func checkInstance(id string) error {
	if id == "" || len(id) > 200 || id == "_" {
		return fmt.Errorf("fleet: instance id %q: want 1 to 200 bytes, not \"_\"", id)
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return fmt.Errorf("fleet: instance id %q: want printable ASCII without spaces", id)
		}
	}
	return nil
}

// WithPeriod sets how often Run meters costs and exchanges with the store.
// Default DefaultPeriod (1 s); range [10 ms, 1 min]. The lease TTL and the
// exchange timeout follow it unless set.
func WithPeriod(d time.Duration) Option {
	return func(o *options) error {
		if d < 10*time.Millisecond || d > time.Minute {
			return fmt.Errorf("fleet: WithPeriod(%v): want 10ms to 1m", d)
		}
		o.period = d
		return nil
	}
}

// WithLeaseTTL sets how long a lease lasts without renewal, measured by
// the store's clock: a dead instance's leases are reclaimed after it, and
// an instance that cannot reach the store falls back to its local share
// after 0.9 of it. Default 3 periods; it must be at least 2 periods (set
// WithPeriod first) and at most 1 h.
func WithLeaseTTL(d time.Duration) Option {
	return func(o *options) error {
		if d < 2*o.period || d > time.Hour {
			return fmt.Errorf("fleet: WithLeaseTTL(%v): want 2 periods (%v) to 1h", d, 2*o.period)
		}
		o.ttl = d
		return nil
	}
}

// WithExchangeTimeout bounds one exchange with the store. Default half a
// period; range (0, period].
func WithExchangeTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 || d > o.period {
			return fmt.Errorf("fleet: WithExchangeTimeout(%v): want (0, period=%v]", d, o.period)
		}
		o.timeout = d
		return nil
	}
}

// WithInitialInstances sets the number of instances assumed until the
// store has said how many are live: before its first exchange, an instance
// holds quota ÷ n of each tenant. Default 1 (the whole quota; a fleet
// restarted while the store is down then admits up to n times the quota
// until the store answers). Range [1, 100000].
func WithInitialInstances(n int) Option {
	return func(o *options) error {
		if n < 1 || n > 100000 {
			return fmt.Errorf("fleet: WithInitialInstances(%d): want 1 to 100000", n)
		}
		o.initialLive = n
		return nil
	}
}

// WithCPU sets the reader of this process's cumulative CPU time that the
// meter divides among the requests (see the package documentation).
// Default pressure.ProcessCPU (getrusage). nil meters only the costs given
// to Charge: wall time recorded by spans then costs nothing.
func WithCPU(f func() (time.Duration, error)) Option {
	return func(o *options) error { o.cpu = f; return nil }
}

// WithLogger sets the logger for state changes (the store lost and found
// again, fallback to local shares), each logged once. Default: none.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error { o.logger = l; return nil }
}

// New returns a Limiter enforcing cfg. Until its first exchange with the
// store (Run, or FinishRound on virtual time), each tenant gets quota ÷
// WithInitialInstances. The errors are a bad Config (wrapping ErrConfig)
// and out-of-range options.
func New(cfg Config, opts ...Option) (*Limiter, error) {
	o := options{period: DefaultPeriod, initialLive: 1, cpu: pressure.ProcessCPU}
	var ttl, timeout bool
	for _, f := range opts {
		if f == nil {
			continue
		}
		prev := o
		if err := f(&o); err != nil {
			return nil, err
		}
		ttl = ttl || o.ttl != prev.ttl
		timeout = timeout || o.timeout != prev.timeout
	}
	if !ttl {
		o.ttl = 3 * o.period
	}
	if !timeout {
		o.timeout = o.period / 2
	}
	if o.ttl < 2*o.period {
		return nil, fmt.Errorf("fleet: lease TTL %v below two periods (%v)", o.ttl, 2*o.period)
	}
	if o.timeout > o.period {
		return nil, fmt.Errorf("fleet: exchange timeout %v above the period (%v)", o.timeout, o.period)
	}
	if o.instance == "" {
		o.instance = defaultInstance()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Limiter{opts: o, seed: maphash.MakeSeed()}
	l.avgCost.Store(math.Float64bits(defaultCost))
	l.rs.live = o.initialLive
	l.rs.storeOK = true
	l.table.Store(l.build(cfg, nil))
	now := time.Now()
	for _, e := range l.table.Load().all {
		l.publish(e, now)
	}
	return l, nil
}

func defaultInstance() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	id := fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	if checkInstance(id) != nil {
		id = fmt.Sprintf("instance-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	}
	return id
}

// Instance returns this instance's id in the store.
func (l *Limiter) Instance() string { return l.opts.instance }

// Period returns the metering and exchange period.
func (l *Limiter) Period() time.Duration { return l.opts.period }

// table is the published configuration: immutable once stored.
type table struct {
	byName map[string]*entry
	def    *entry
	all    []*entry // the default pool first, then by name
}

// entry is one tenant's (or the default pool's) configuration and state.
type entry struct {
	st    *tenantState
	quota Quota
	tau   [levee.NumCriticalities]int64 // burst tolerance, ns of lease time
}

// Burst tolerance by criticality, as a fraction of the tenant's burst:
// a tenant at its limit loses its sheddable requests first.
var critBurst = [levee.NumCriticalities]float64{
	levee.CriticalPlus:  1,
	levee.Critical:      1,
	levee.SheddablePlus: 0.5,
	levee.Sheddable:     0.25,
}

// build makes the table for cfg, keeping the state of tenants in old.
func (l *Limiter) build(cfg Config, old *table) *table {
	t := &table{byName: make(map[string]*entry, len(cfg.Tenants))}
	mk := func(name string, def bool, q Quota) *entry {
		e := &entry{quota: q}
		switch {
		case old == nil:
		case def:
			e.st = old.def.st
		default:
			if oe := old.byName[name]; oe != nil {
				e.st = oe.st
			}
		}
		if e.st == nil {
			e.st = newTenantState(name, def)
		}
		tau := q.burstSeconds() * float64(time.Second)
		for c := range e.tau {
			e.tau[c] = int64(tau * critBurst[c])
		}
		return e
	}
	t.def = mk("", true, cfg.Default)
	t.all = append(t.all, t.def)
	names := make([]string, 0, len(cfg.Tenants))
	for n := range cfg.Tenants {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		e := mk(n, false, cfg.Tenants[n])
		t.byName[n] = e
		t.all = append(t.all, e)
	}
	return t
}

func (t *table) lookup(tenant string) *entry {
	if e := t.byName[tenant]; e != nil {
		return e
	}
	return t.def
}

// Update replaces the configuration atomically: every Allow after it sees
// the new table, none a mix. Tenants kept keep their state (leases,
// debts, measurements); a changed quota rescales the tenant's lease
// at once, and the next exchange (within a period) asks the store for the
// new share. A removed tenant joins the default pool; its leases in the
// store expire after the lease TTL. A bad cfg is refused (wrapping
// ErrConfig) and the old one stays in force.
func (l *Limiter) Update(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.table.Load()
	t := l.build(cfg, old)
	l.table.Store(t)
	now := time.Now()
	for _, e := range t.all {
		r := &e.st.r
		if r.quota != e.quota.Cores && r.quota > 0 && r.leased {
			r.lease *= e.quota.Cores / r.quota
		}
		l.publish(e, now)
	}
	return nil
}

// Allow reports whether a request of tenant at criticality c may start at
// now, and if not, after how long the tenant's bucket will have room. It
// implements admit.TenantLimiter: lock-free, allocation-free, no system
// call. Tenants not in the Config draw on the default pool; with no
// default quota they are always allowed. An invalid criticality counts
// as Critical.
func (l *Limiter) Allow(tenant string, c levee.Criticality, now time.Time) (time.Duration, bool) {
	e := l.table.Load().lookup(tenant)
	if e.quota.Cores == 0 {
		return 0, true
	}
	st := e.st
	inc := st.inc.Load()
	if inc < 0 {
		st.rejected.Add(1)
		return l.opts.period, false
	}
	if !c.Valid() {
		c = levee.Critical
	}
	tau, n := max(e.tau[c], st.minTol.Load()), now.UnixNano()
	for {
		old := st.tat.Load()
		tat := max(old, n)
		if tat-n > tau {
			st.rejected.Add(1)
			return time.Duration(tat - n - tau), false
		}
		if st.tat.CompareAndSwap(old, tat+inc) {
			st.admitted.Add(1)
			return 0, true
		}
	}
}

// Run meters and exchanges with s every period until ctx is done, the
// first round at once. An exchange that fails or takes longer than the
// exchange timeout is logged (once until one succeeds again) and leaves the
// leases in force until they expire; then each tenant falls back to its
// local share. Requests never wait for s. Start it with go l.Run(ctx, s).
func (l *Limiter) Run(ctx context.Context, s Store) {
	tick := time.NewTicker(l.opts.period)
	defer tick.Stop()
	for {
		r := l.BeginRound(time.Now())
		ectx, cancel := context.WithTimeout(ctx, l.opts.timeout)
		err := s.Exchange(ectx, r)
		late := ectx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil && late {
			// An answer that came after the timeout is not trusted: its
			// leases were granted longer ago than the others think.
			err = fmt.Errorf("fleet: exchange took longer than %v", l.opts.timeout)
		}
		l.FinishRound(time.Now(), r, err)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// errNoGrant is the error FinishRound records when a store returns fewer
// grants than claims.
var errNoGrant = errors.New("fleet: store returned fewer grants than claims")
