// Package loadgen is an open-loop HTTP load generator, written as a library
// for levee's demo and loopback checks (after tsenart/vegeta's split of
// attack and report).
//
// Open loop: arrivals follow a schedule of phases, each a constant rate for
// a duration, and every arrival is sent at its scheduled time in its own
// goroutine whether or not earlier requests have completed, as real users
// do. A closed loop (a fixed pool of senders that wait for each answer)
// slows down with the server and hides overload; Closed offers one only to
// measure peak throughput.
//
// Latency is measured from the scheduled time, not from the moment the
// request left, so a slow generator or a queue in front of a connection
// counts against the server (no coordinated omission); Report.MaxLag says
// how far the arrival process fell behind.
//
// Each logical request (its retries included) ends in one Outcome, in the
// vocabulary of levee's reports (DESIGN.md): Goodput, Rejected (an explicit
// levee 429/503/504), Throttled (refused locally by the client), Failed
// (timeouts, resets, anything else) — and GenError, the generator's own
// failures (too many requests in flight, no file descriptor or port left),
// counted apart because they say nothing about the system under test.
// Attempts on the wire are counted by a RoundTripper (CountAttempts) placed
// right above the network, below any retrying or throttling layer.
//
// Naive and Single build request functions for the two kinds of clients
// the demo compares; NewTransport is a keep-alive transport sized for
// loopback load. Latency percentiles come from HdrHistogram.
package loadgen
