// Package admit is levee's server-side admission controller: it decides, per
// request, whether to start work, so that a server provisioned for C keeps
// completing about C whatever is thrown at it, and chooses what to
// sacrifice.
//
// # Goals
//
//   - Hold the resource signals (CPU against the quota, scheduler latency,
//     queueing delay: package pressure) at their targets under any offered
//     load, with no rejection when the server is below target.
//   - Sacrifice in a fixed order: work whose caller is gone or whose
//     deadline cannot be met; then the excess of tenants far above their
//     fair share, whatever their criticality; then the criticalities from
//     SHEDDABLE up to CRITICAL_PLUS, a level touched only when every lower
//     one is fully shed, and inside the partly shed level tenants above
//     their fair share first.
//   - Degrade (package degrade) before shedding, and tell rejected callers
//     when to come back (Retry-After following the observed length of
//     overload episodes) or not to retry at all (when retries are already a
//     large share of the traffic).
//   - An accept path cheaper than one time.Now(): no lock, no allocation, no
//     system call.
//   - Run admitted work in order, a bounded number at once: the excess
//     waits parked in the run queue (Ticket.Wait), not in the Go run queue
//     where every runnable handler shares the CPU.
//
// # Non-goals
//
// Buffering load: Admit answers at once, and the run queue holds only what
// was admitted, for at most 500 ms (WithRunQueue); distributed or
// fleet-wide quotas; deciding what a degraded answer is (the handler reads
// the level and decides); load balancing.
//
// # The model in a few lines
//
//	every period (Step, 50 ms by default):
//	  load  = max over signals of value/target             (1.0 = at target)
//	  over  = a waiting signal above target, or a utilisation above target
//	          confirmed (signals.go), held two periods
//	  R     = arrival rate past deadline/quota checks (1 s smoothing, floods at once);
//	          while over, plus the growth of the demand waiting unread (a
//	          signal's Unread: goroutines waiting for a processor, which a
//	          saturated HTTP/1 server's waiting connections are), counted
//	          when it arrives and not again when read (meter.go)
//	  not shedding: capacity K ≈ admitted rate / load     (lag-aligned, while 0.2 < load ≤ 1)
//	        — a floor: a process spends up to idleMax = 0.15 of its target
//	        whatever it serves, so a reading at load l puts the capacity below
//	        its ceiling H = K·l(1−0.15)/(l−0.15) (both smoothed per reading;
//	        H ≈ K near the target, 3.4K at 0.2)
//	  arrivals jump above 2K and H → degradation up now, shedding at the next Step
//	        at A = K (the signal would show the flood a period or two later);
//	        until then (and at any load once a request's solo service time S
//	        is known) admissions beyond max(2K, H, K·S/period) a period are
//	        shed by the ladder down to K (surge.go)
//	  over and degradation already up → shed, target A = K ÷ load (≤ K; ≤ H, and
//	        the backlog below modelled on H, while the arrivals are below H:
//	        then K may be a light load's floor under the demand) — or, when the
//	        binding signal watches a bottleneck (pressure.Concurrency: a dependency's
//	        pool), A = what it completes (its Capacity, else the handlers' completion
//	        rate); when a queue before the handlers binds while the utilisation
//	        reads ≥ 0.8 of its target (the process has its CPU and uses it: a
//	        flood read late), the divisor is max(utilisation, 1), not the load — and first drain
//	        the backlog the flood built before the signal showed it (model:
//	        backlog shrinks by K − admitted; the saturated signal is not integrated),
//	        shedding more only where A already sheds: the ladder's partly shed
//	        rank (or the one above its fully shed ones), then the ranks the
//	        tenant stage cuts; never a rank or tenant A leaves whole
//	  shedding: A ← A·min((est·corr/A)^0.35, 1.1), est = admitted ÷ load over the two
//	        periods the reading reflects (arrival noise cancels), corr ← corr·load^-0.01;
//	        below target A is never cut; while a queue before the handlers
//	        binds (a delay signal that watches no bottleneck) and reads less
//	        than the period before, A is held: the backlog drains at what is
//	        admitted, and a delay says how long the queue is, not by how much
//	        the rate is over
//	  a drain the signal does not confirm within its lag ends; once the signal
//	        has read below half its target for longer than its lag, A rises
//	        up to 1.5× a period instead of 1.1×
//	  run queue (off below load 0.5 with nothing shed or degraded): bound
//	        B = max(2 × running-at-once ÷ load, learned while healthy and busy;
//	        4; 2×GOMAXPROCS), ×1.25 a period while requests wait with load < 0.8;
//	        for requests longer than Go's 10 ms slice with N ≤ 2P, also B ≤ max(P, 2N),
//	        N = K × the service time of requests run while not busy, P = GOMAXPROCS
//	        (the need, lifted alike while requests wait with room);
//	        a queue standing (oldest wait > 10 ms at two Steps) serves the
//	        newest first and expires waits after 100 ms instead of 500,
//	        unless a signal says it absorbs a burst (pressure's burst.go)
//	  S = R − A → tenants (an IPv6 /48 sending more than a fair share counts
//	        as one: WithPeerGroups) above 2 fair shares on evidence, cut to a
//	        paced rate, booked at their exact counts once listed → ladder →
//	        per-rank fractions, the partly shed rank as a per-period count for
//	        unlisted tenants, of which retries take only the first half;
//	        a boundary with every lower level shed is held while what is left
//	        to shed is ≤ 5% of A (the load error it leaves is not integrated),
//	        so a more critical level does not pay for every period's noise
//	  a forced level F = max(drill's ForceShed, overload manager's
//	        OverloadShed) → every rank sheds at least F's share
//	  dry-run: A = K frozen at its value before the overload, nothing
//	        enforced, every rejection counted as a would-be one
//
// # How the parts fit
//
// Admit reads four things published by Step through atomic pointers: the
// coarse clock, the shedding plan (a fraction per criticality rank, and
// per listed tenant or group), the preallocated rejection errors (their
// RetryAfter and NoRetry) and the tenant sampling ratio. It counts
// arrivals per criticality with one atomic add, checks the context and
// the deadline against the route's learned service time (a bounded,
// lock-free table of low quantiles filled by Ticket.Done from one ticket
// in 64; see WithRoute for when a deadline counts as one that cannot be
// met), checks the tenant's quota (a lock-free GCRA bucket, for tenants
// named with WithQuota), samples requests (all of them at low rates, down
// to one in 2^k so that about 512 a period are kept) into a lock-free
// ring for tenant accounting, with an untrusted caller's address prefixes
// (levee.Call.Peer), and applies the plan: per rank all, none or a
// counter-based (Weyl sequence) fraction; for a listed tenant or group,
// its own cut as a paced rate (a lock-free GCRA) before the ladder; for
// unlisted tenants in the partly shed rank, a per-period count, so that
// admissions follow the aim whatever the arrivals do.
// Ticket.Wait then takes a run slot (two atomic operations while one is
// free and nobody waits) or queues the request, in arrival order, until a
// Done frees one, its caller goes away, or it has waited too long; a
// request that waited is checked against its deadline again before it
// starts. Step drains the ring into bounded heavy-hitter tables of
// tenants and prefixes with HyperLogLog counts of active tenants
// (internal/fairq), reads the signals and counters, steps the degradation
// controller, runs the control law, reads the listed tenants' exact counts
// from the plan in force, publishes the next plan and the run queue's
// bound, and expires the waits that are too long. Snapshot, the observer
// and the logger report state changes; nothing is logged per request.
//
// A Step is a sequence of stages, each a type in its own file that owns
// its state and has inputs and outputs a table test names (the model is
// CockroachDB's admission package):
//
//	signals.go     how signals combine: the verdict and the load
//	surge.go       the bound on what is admitted before shedding starts
//	meter.go       counters → rates; a jump or a flood taken at once
//	retryshare.go  the share of retries; "don't retry" with hysteresis
//	               (then package degrade steps its level)
//	law.go         the control law, a pure step: capacity, episodes, aim
//	episode.go     episode lengths → Retry-After
//	runbound.go    the run queue's bound
//	solo.go        the service time of a request that does not share the CPU
//	tenants.go     tenant samples → heavy hitters, fair share → plan.go,
//	               the order of sacrifice as a published plan
//	forced.go      shed levels forced by a drill and an overload manager
//	dryrun.go      dry-run: the estimate, the counts, the log line
//	snapshot.go    Snapshot, events, logging
//
// # Dry-run and drills
//
// Nobody turns shedding on in production without first watching what it
// would shed. In dry-run (WithDryRun, SetDryRun) every decision is made as
// usual and none is enforced: what would have been rejected is admitted
// and counted in Snapshot.WouldReject by criticality and reason, and
// logged at most once a second; the control loop, whose signals stay
// above target when nothing is shed, estimates what it would shed from
// the capacity it learned before the overload instead of steering (see
// dryrun.go). ForceShed sets a floor under the shed level until a given
// time, whatever the signals say: a drill of the order of sacrifice;
// OverloadShed sets another, an overload manager's, raising shedding
// while memory or descriptors run out; the higher is in force (see
// forced.go). SetQuotas replaces the tenant quotas while the server
// runs. None of them takes a lock on the accept path.
//
// # Time and lifecycle
//
// Time is a parameter everywhere: AdmitAt, Ticket.DoneAt and Step take the
// time, so a simulator drives the same code on virtual time and the same
// seed (WithSeed) gives the same decisions. Admit and Run are the real-time
// shorthands. Every gate and window (deadlines, plan expiry, run-queue
// waits, rates, episodes) is measured on one scale, nanoseconds since the
// Controller was made, read from Go's monotonic clock on the real-time
// path: a wall-clock step moves nothing. Explicit times are converted to
// it (monotonically when they carry a monotonic reading, as time.Now's
// do); a Step whose time falls before the previous one's counts as one
// period later.
//
// Nothing stays in force without a Step: a plan not refreshed for four
// periods is no longer applied, and when Run is not active (never started,
// or its context done) Admit steps the Controller itself once a period has
// passed without a Step, and says once in the log that Run is missing.
//
// # Options
//
// Options follow levee's one convention for bad values: an option not
// given, or given zero where zero is outside its range (the period),
// means its documented default; a value inside the range is taken as
// given (WithRunQueue(0) turns the run queue off, WithRunBound(0) keeps the
// learned bound); a nil route function, cores function, observer, logger or
// degradation controller restores the default; any other value out of its
// documented range (a negative run-queue wait, an empty quota tenant, a
// negative or NaN quota rate) is a programming error, and New panics with
// a message naming the option, the value and the range, as
// time.NewTicker does.
// Check values that come from users where they are read.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), admit is a
// policy: it imports the standard library, package levee, degrade and the
// internal leaves only, and reads resources through the levee.Signal
// interface rather than importing pressure. The adapters (leveehttp,
// leveegrpc, leveeprom) put it in front of a server; the simulator in tools/
// runs it on virtual time.
package admit
