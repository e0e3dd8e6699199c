// Package load is levee's open-loop load generator, capacity planner and
// degradation drill, written as a library with the levee load command as
// a thin layer on top (after tsenart/vegeta's split of attack and report:
// Run produces a Result, Result.Run turns it into levee's one report
// schema, package report, which the command prints as text, JSON or HTML).
//
// Open loop: arrivals follow a schedule of phases, each a constant rate or
// a linear ramp for a duration, and every arrival is sent at its scheduled
// time in its own goroutine whether or not earlier requests have
// completed, as real users do. A closed loop (a fixed pool of senders that
// wait for each answer) slows down with the server and hides overload;
// Closed offers one only to measure peak throughput.
//
// Latency is measured from the scheduled time, not from the moment the
// request left, so a slow generator or a queue in front of a connection
// counts against the server (no coordinated omission); Result.MaxLag says
// how far the arrival process fell behind. Each phase keeps an
// HdrHistogram of the latency of its successes, and each 100 ms bucket the
// 99th percentile of the successes completed in it, so a stall shows both
// in the distribution and in time.
//
// Each logical request (its retries included) ends in one Outcome, in the
// vocabulary of levee's reports (DESIGN.md): Goodput, Rejected (an explicit
// levee 429/503/504), Throttled (refused locally by the client), Failed
// (with its Failure class: timeout, reset, refused, 5xx, 4xx, other) — and
// GenError, the generator's own failures (too many requests in flight, no
// file descriptor or port left), counted apart because they say nothing
// about the system under test. Attempts on the wire are counted by a
// RoundTripper (CountAttempts) placed right above the network, below any
// retrying or throttling layer. A Mix gives each arrival a criticality and
// a tenant, deterministically spread, and the Result splits every figure
// by them.
//
// HTTP sends the requests of one target under a client model: none (one
// attempt), naive (N immediate retries, per-attempt timeout) or levee
// (leveehttp.NewTransport). Plan ramps the load on a bounded schedule to
// find a service's capacity at its SLO (the knee) and its breaking point,
// checks with retrying clients whether it comes back after an overload
// (metastability), and turns the capacity into a plan (Sizing: N+2, two
// sites, the shedding threshold). Drill forces each degradation level
// through a levee service's admin endpoint and checks the degraded
// responses and the order of shedding.
//
// Safety: CheckTarget refuses targets off the loopback network unless the
// host is named; Limits caps rate and duration; cancelling the context
// stops a run cleanly and the Result covers what ran.
//
// Layering: load sits with the tools (tools/...), above the adapters
// (it uses leveehttp's client); only cmd/ and bench/ import it.
package load
