// Package report is levee's one report schema and the one definition of
// every figure derived from it, in the vocabulary of DESIGN.md ("Report
// vocabulary"). The simulator (levee sim), the loopback demo (levee demo),
// the load tester (levee load) and the peer benchmarks (bench/) all print
// a Report with --json and compute goodput, recovery, outage and wasted
// work with the functions here, so that a number means the same thing
// wherever it appears.
//
// The schema: a Report holds Runs (one protection, one client model); a
// Run holds its Phases (named segments of the offered-load schedule, each
// with Rates: offered, attempted, throttled, goodput, rejected, failed per
// second, split by criticality and tenant when they were mixed, and the
// Latency of successes from their scheduled time), per-run figures
// (OutageS, RecoveryS, WastedWorkShare, crashes), per-instance totals and
// the Series over time that charts and the figures are drawn from.
//
// The derived figures: Tally.Rates (counts → rates), Recovery
// (recovery_s), Outage (outage_s), Sustained (the first stretch of whole
// seconds at or above a rate, which Recovery and a server's recovery use),
// BestSecond (a saturated service's peak), Share (wasted work) and Median
// (repeated runs). Every figure is rounded to 3 decimals (Round), latencies
// to the microsecond (RoundSeconds), so that a deterministic run encodes to
// the same bytes.
//
// The package uses the standard library only; package chart (a
// sub-package) draws a Report as HTML with SVG charts.
//
// Layering: report sits with the tools (tools/...), above the adapters;
// only the tools, cmd/ and bench/ import it.
package report
