// Package limits is the loopback lab of a Go server near one of its own
// limits (issue 22): memory against GOMEMLIMIT, goroutines against a
// ceiling, descriptors against RLIMIT_NOFILE. Each run re-executes the
// test binary as a fresh server process (Start, Hijack) behind a
// protection, drives it from this process with levee's open-loop
// generator (package load), and watches it from outside: its resident
// set (/proc/PID/status), a health probe every 100 ms on a new connection
// (as a load balancer's), and its own report at /lab/stats (GC CPU time,
// live heap, goroutines, the overload manager's level, cap and readings).
//
// The protections (ServerConfig.Protection):
//
//	none      net/http with Protect's timeouts (ReadHeaderTimeout 10s, IdleTimeout 2m)
//	overload  the overload manager alone (overload.Resources of pressure.Default,
//	          leveehttp.Overload: its gate, keep-alive and timeouts), built by hand
//	levee     leveehttp.Protect with its defaults: admission control (CPU, scheduler
//	          latency, queue delay, concurrency) and the overload manager (the
//	          limits' signals), exactly as a service gets them
//	admit     leveehttp.Protect with overload.enabled false: admission control
//	          alone with every signal, memory included
//
// The labs:
//
//   - RunMemory: GOMEMLIMIT=256MiB, each request holds a pointer-free
//     1 MiB slice (every page written) for 500 ms; half of what fits,
//     then 3× what fits, then half again. MemoryLine says the peak RSS ÷
//     the limit, the GC's CPU share, the surge's goodput ÷ what fits, the
//     probes answered and the recovery after the surge.
//   - RunLimit with Goroutines: a ceiling of 1000, requests that hold a
//     goroutine for a second, and 600 connections held open without a
//     request; with Files: RLIMIT_NOFILE 256 set in the server, and 450
//     connections held open, most sending part of a request head. A
//     LimitLine says the highest level and the time at Critical, whether
//     the server died or panicked, the probes answered, and the recovery.
//
// The realtime tests (build tag realtime) run them side by side and check
// issue 22's criteria; their documentation gives the commands. Loopback
// only: every server listens on 127.0.0.1, every run is bounded in time.
package limits
