// Package fleet enforces tenants' quotas across a fleet of instances, in
// CPU cost rather than in requests: "tenant A may use 2 cores of the
// whole service". Each instance holds a share of every tenant's quota (a
// lease) and enforces it locally on the accept path, with no network call
// per request; the instances meet every period in a Store — Redis in
// production (package fleetredis), memory for the simulator — to report
// what each tenant used and wanted and to rebalance the leases.
//
// # Goals
//
//   - A tenant's fleet-wide usage converges to its quota whatever the
//     spread of its load over the instances, and tenants under their
//     quota are not refused.
//   - The accept path (Allow, consulted by admit.Controller through
//     admit.WithTenantLimiter) takes no lock, makes no call and does not
//     allocate.
//   - Losing the store never blocks or fails a request: each instance
//     falls back to its local share and says so (log, Snapshot, metrics),
//     and reconverges within a few periods once the store is back.
//
// # Non-goals
//
// Exact per-request CPU accounting (Go has no per-goroutine CPU clock;
// see below); quotas of memory, bandwidth or request counts (use
// admit.WithQuota for request rates per process); a coordinator of its
// own (the store is the Redis its users already run).
//
// # Cost: how it is measured, and with what error
//
// A request's cost is a share of the process's CPU time. Every period the
// meter reads the process's cumulative CPU time (getrusage, WithCPU) and
// divides what the period used among the requests that finished in it in
// proportion to their handler wall time (Span, Handler, Record), per
// tenant and route: cost = wall × ΔCPU ÷ Σwall. A request whose cost the
// caller knows (a cost function, or a CPU clock of its own) reports it
// with Charge or Span.EndCost instead; that cost is taken out of ΔCPU
// before the division. The division is exact when every request turns
// wall time into CPU at the same rate, and errs otherwise:
//
//   - a request waiting on a dependency (I/O, a lock) has wall time and
//     little CPU, and is charged the CPU-bound requests' rate: such
//     handlers should report their cost (EndCost), or accept that waiting
//     counts as use;
//   - CPU outside any handler (parsing, rejections, GC, background work)
//     is spread over the handlers by wall time, so every tenant pays its
//     share of the overhead;
//   - a request is charged in the period it finishes, at that period's
//     rate;
//   - under CPU contention from other processes, wall time stretches more
//     for some requests than for others: measured with three processes on
//     a busy 2-core machine, a route doing 4× the work of another was
//     charged 5.3× (+34%); on a quiet machine the ratio follows the work.
//
// The bucket is charged, over time, exactly the metered cost: Allow
// charges each admitted request the tenant's smoothed cost per request at
// once (so that a burst of concurrent requests cannot run far past the
// lease before any finishes), and each period the metered cost replaces
// what was charged, the difference charged or refunded (requests admitted
// here but shed later by admit cost nothing in the end).
//
// # The model in a few lines
//
//	every period, on each instance, per tenant with requests in the last 10 periods:
//	  usage  = metered cost ÷ period           demand = usage + refused × cost per request
//	  wants  = demand smoothed over ~50 requests (a round's weight: requests ÷ 50, in [0.05, 0.5])
//	  target = wants·(q − r)/Σwants, r = (q − Σwants)/(n+1)   when the fleet wants ≤ q
//	         = q·wants/Σwants                                  when it wants more
//	         at most q ÷ live instances on a tenant's first claim here (new, or back after idling)
//	  store:   has = min(target, q − Σ others' has); entries older than the TTL (store's clock) dropped
//	  bucket:  GCRA at rate has (cores), tolerance = burst ÷ q seconds (a quarter for SHEDDABLE,
//	           half for SHEDDABLE_PLUS), at least one request's cost
//	no lease (idle here, or not yet granted): the free part of the quota ÷ instances without one,
//	        at most q ÷ live instances
//	store unreachable past 0.9 TTL: every tenant at q ÷ live instances (as last known)
//
// The leases never sum above the quota at the store (each grant is
// clamped to what the others leave free, atomically); an instance holds a
// lease for at most 0.9 of the TTL after the exchange that granted it,
// measured from before it was sent, while the store keeps it for the TTL
// from when it was applied, so an instance's lease has always expired
// locally before the store gives it to others — whatever the instances'
// clocks say, since the store's expiry uses its own clock. A new demand
// is served within about three periods: one to measure it, one for the
// instances holding too much to release it, one to take it.
//
// # Coexistence with admit.WithQuota
//
// admit.WithQuota limits a tenant's requests per second on one process;
// this package limits its CPU across the fleet. Where both apply a request
// must pass both, WithQuota first: a request WithQuota refuses never
// reaches Allow and uses none of the fleet quota, so the stricter of the
// two wins. The order is fixed in one place, admit's accept path, and
// documented on admit.WithTenantLimiter.
//
// # Failure modes
//
// The store down or slow (an exchange failing or taking longer than the
// exchange timeout): the leases stay in force until they expire, then
// every tenant falls back to its local share, quota ÷ live instances as
// last known; Snapshot.Fallback and the metric levee_fleet_fallback say
// so, and the change is logged once. Requests never wait for the store.
// The store back: the next exchange grants leases again (within a period
// or two). An instance that dies: its leases are reclaimed by the others
// after the TTL. A store that lost its data (restarted without
// persistence) is refilled by the next round of every instance. Clock
// skew between instances does not matter (periods are local, expiry is
// the store's). A config reload (Update) is atomic for Allow.
//
// # Bounds
//
// Memory: per listed tenant a few hundred bytes, and 16 route meters
// (1 KiB) once it is metered. Store load: each instance updates each
// tenant it served in the last 10 periods once a period (about 10 µs of
// Redis time each, in batches of 200 per script call). A tenant whose
// quota is a fraction of a request per second per instance is enforced
// only on average over many periods: each instance lets one request
// through and then holds the tenant until its share has paid for it.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), fleet sits beside the policies, in a
// module of its own (github.com/levee-dev/levee/fleet) with its store and
// exporter, fleetredis and fleetprom, so that the library module does not
// carry go-redis: package fleet itself imports the standard library, package
// levee and pressure only, and a Limiter plugs into admit as an
// admit.TenantLimiter without admit importing it. The simulator in tools/ runs
// it on virtual time with a MemStore; no adapter imports it.
package fleet
