// Package pressure provides the resource signals from which levee's
// admission controller (package admit) judges overload. Each signal
// implements levee.Signal (Value against Target). A waiting signal
// (scheduler latency, queueing delay, concurrency) above its Target means
// overload; CPU, a utilisation (it has a Saturation method), above its
// Target counts when a waiting signal confirms that work waits (package
// admit, "How signals combine").
//
//	signal        Name            Value                                    default Target
//	CPU           "cpu"           fraction of the allowed cores used       0.95
//	SchedLatency  "sched_latency" p99 Go run-queue wait, seconds           0.050
//	QueueDelay    "queue_delay"   CoDel minimum of arrival → handler, s    learned (100 × CPU per request per core,
//	                                                                       × the handler time's spread)
//	Concurrency   "concurrency"   requests waiting in the handler ÷ those  1
//	                              the learned latency target allows
//	Memory        "memory"        fraction of the memory limit in use      0.8
//	GCCPU         "gc_cpu"        GC's share of the available CPU          0.3
//	Count         "goroutines"    live goroutines ÷ a configured ceiling   0.9
//	Count         "open_files"    open descriptors ÷ RLIMIT_NOFILE         0.8
//
// Default builds them all for this process (goroutines only with a
// ceiling), Simulated the CPU, queue-delay and concurrency signals for an
// instance on virtual time; there is one set of defaults, the
// constructors' own, so that a simulator's levee is Default's levee.
//
// # Three kinds of signal
//
// A controller that steers an admitted rate should know what each kind
// tells it:
//
//   - CPU is a utilisation: it rises in proportion to the admitted rate,
//     so admitted ÷ (value ÷ target) estimates the capacity.
//   - Scheduler latency, queueing delay and concurrency are waits: about 0
//     while nothing waits, whatever the load, and growing fast once a
//     queue stands (before the handler, in the Go run queue, inside the
//     handler). They say "too much", not "how much".
//   - Memory, GC CPU, goroutines and descriptors measure how close the
//     process is to a hard limit of its own. Shedding helps them late
//     (memory after the next GC, descriptors when connections close); they
//     are levels for a controller's floor and for overload actions (turning
//     keep-alive off, shorter timeouts), not rates to divide by.
//
// # Targets relative to the service
//
// A wait is overload only relative to the service: a 10 ms-per-request
// tier on 3 cores waits longer at 90% load than a 1 ms one on 64, and a
// handler that waits 5 ms on its database is healthy where one that waits
// 50 ms behind 7 others is not. The queue-delay target is therefore a
// number of per-core CPU times per request (learned from the CPU signal
// and the requests observed), and the concurrency signal's latency target
// a multiple of the learned no-wait service time; both are bounded by a
// floor, a ceiling and a share of the median time budget callers send.
// Learning stops upwards while another signal of the set reads above its
// target, so that overloaded latency never becomes the new normal; the
// concurrency signal's service time still rises when latency stops
// depending on concurrency (shedding showed the slowness is the service's
// own, a dependency that got slower), and falls at once when the service
// is fast again, so nothing ratchets. A queue that rises while admission
// does not shed is a burst before it is an overload: both signals let it
// grow to half the callers' median budget for a few seconds before they
// hold it to their targets (burst.go), so that load above the capacity
// for a moment and below it the next is served as an unprotected server
// would serve it. QueueDelay and Concurrency say how in their
// documentation.
//
// # Sampling
//
// Every signal has SampleAt(now), which takes one sample at an explicit
// time (tests and the simulator drive it on virtual time, with fake readers
// injected through options), and Run(ctx), which samples at the signal's
// period (50 ms for CPU, scheduler latency and concurrency: the admission
// controller's period; 100 ms for the others, a second for descriptors)
// with real time until ctx is done and then returns, leaving no goroutine
// or ticker behind. Values are smoothed by an exponentially weighted
// moving average with a time constant (50 ms for CPU and scheduler
// latency, 100 ms for concurrency, a second for GC CPU; QueueDelay's
// interval minimum and the limits need none). Value and Target are atomic
// loads, safe to call from any goroutine; the request-path methods
// (QueueDelay.Observe, Concurrency.StartAt, DoneAt, Drop, Suspend and
// Resume) are lock-free and do not allocate.
//
// The samplers are ordinary goroutines. When the process's run queue is
// long — the overload they exist to see — they run late: on the shared
// build machine at load average 16 a GOMAXPROCS=1 server's samplers went
// seconds between samples, while the scheduler latency they finally read
// was 0.1–1.8 s, far above its target. A sample less than half a period
// after the previous one (two ticks found waiting) is skipped rather than
// computed over microseconds. Each signal's Reading().Time says when its
// value was taken, so a controller can tell a stale value.
//
// # CPU: whose usage, against which cores
//
// The question is "how busy is this process relative to the CPU it can
// get?". Both halves are easy to get wrong.
//
// The numerator is this process's CPU time from getrusage(RUSAGE_SELF), all
// threads, user plus system. The cgroup's own counter (cpu.stat usage_usec,
// cpuacct.usage) counts every process in the cgroup: at the root cgroup,
// where a process on a plain host or a VM lives (this repository's build
// machine: everything is in "/", cgroup v1 cpu/cpuacct plus an empty cgroup2
// at /sys/fs/cgroup/unified), it counts the whole host, so a neighbour's
// batch job would make this process shed. The cgroup counter is therefore
// read only where it has a meaning for this process: in the cgroup whose
// quota binds it. There all processes of the cgroup share the quota, so the
// cgroup's usage ÷ quota says how close the throttling is even when other
// processes use most of it; the raw value is then the larger of the two
// ratios. A root cgroup never has a quota, so the host's counter is never
// read.
//
// The denominator is the number of cores the process may use:
// min(GOMAXPROCS, CPUs in the affinity mask, cgroup quota ÷ period,
// cpuset size). The quota is the
// tightest one on the path from the process's cgroup up to the mount point
// (a Kubernetes pod's limit binds its containers); it is re-read every
// second. GOMAXPROCS caps it because the Go scheduler runs Go code on at
// most GOMAXPROCS threads at once: a GOMAXPROCS=1 server on a 2-core host
// whose P is saturated, with requests queueing in its run queue and socket
// buffers, reads 1.0, not 0.5 (a host-wide denominator would keep it under
// any threshold — "Where the queue really is" in levee's design). Threads
// without a P (cgo calls, blocking system calls) can push the value a
// little above 1. Without a cgroup CPU controller (not Linux, no cgroup
// filesystem, unreadable or malformed files) the denominator is GOMAXPROCS
// alone and CPU.Reading says why.
//
// Host-wide figures (/proc/stat, the load average) are never used.
//
// CPU used is not CPU wanted. On a host where other processes compete for
// the same cores and no quota reserves any for this process, it may get
// half a core while its run queue grows: used ÷ allowed then reads 0.45
// (measured on the 2-core build machine at load average 8, GOMAXPROCS=1,
// one busy goroutine). WithRunQueueWait adds the time this process's
// threads waited in the kernel's run queue (schedstat run_delay) to the
// numerator, which read 1.06 in the same run. It is off by default, so that
// Value keeps the meaning "share of the allowed cores used"; the scheduler
// latency signal covers much of the same ground when goroutines outnumber
// the Ps.
//
// # Scheduler latency, queueing delay, waiting in the handler
//
// CPU can read low while the process is overloaded: a VM whose host grants
// fewer cores than it advertises, a quota that throttles in bursts, or work
// that waits on something else. SchedLatency reads the Go runtime's
// "/sched/latencies:seconds" histogram and reports the p99 of the time
// goroutines spent runnable in the last period; its Unread method counts
// the goroutines waiting for a processor now, which on a saturated HTTP/1
// server are mostly connections whose next request has arrived unread
// (the admission controller adds the count's growth to the arrivals it
// counts: package admit, WithSignals). QueueDelay takes, from the
// request path, the time between a request's arrival and the start of its
// handler and reports the CoDel-style minimum over each 100 ms interval: a
// value above its target means that even the luckiest request waited, a
// standing queue. Concurrency sees the third place a queue forms: inside
// the handler, on a dependency's connection pool or a lock, with the CPU
// low — a dependency that slows from 5 ms to 50 ms behind a pool of 8.
//
// # Memory, GC, goroutines, descriptors
//
// A Go server that admits more than fits in memory does not slow down: its
// GC runs without pause and then the kernel kills it. Memory reads the
// live heap and the runtime's other memory against GOMEMLIMIT and the
// cgroup's limit (the GC's heap goal too, against a limit the runtime does
// not know), GCCPU the collector's share of the CPU, and the Count signals
// the goroutines against a configured ceiling and the open descriptors
// against RLIMIT_NOFILE. Their sampling costs (BenchmarkSample on the
// shared 2-core build machine, no allocation): memory ~4 µs (plus ~100 µs
// once a second re-reading the cgroup limit, as CPU does), GC ~0.3 µs,
// goroutines ~0.1 µs, open files ~13 µs with a dozen descriptors, once a
// second.
//
// # Options
//
// Options follow levee's one convention for bad values: an option not
// given, or given zero where zero is outside its range (a period, a
// target, a percentile), means its documented default; a smoothing of 0
// means none; a nil reader restores the default; any other value out of
// its documented range is a programming error. NewCPU, whose signature
// has an error for the environment it reads, returns it as that error;
// the other constructors panic with a message naming the option, the
// value and the range, as time.NewTicker does. Check values that come
// from users where they are read.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), pressure is a
// policy-level package: it imports the standard library, package levee and
// the internal leaves only, and admit consumes it through levee.Signal
// without importing it. Adapters and applications build the signals and hand
// them to admit.
package pressure
