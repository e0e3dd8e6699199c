// Package lab runs levee's loopback labs that compare configurations side
// by side: a Lab is a schedule of load in multiples of the service's
// capacity, the variants it compares (a protection and who sends the
// load), the figures each run yields and the acceptance criteria over
// them. Every run is a fresh pair of processes (tools/loopback): the
// backend with GOMAXPROCS=1 pinned to the first CPU, an open-loop
// generator of naive clients (1 s per attempt, 2 immediate retries)
// pinned to the second.
//
// Execute measures the capacity with a closed loop, then runs the
// variants alternated, each repetition in the reverse order of the one
// before, and returns each run in levee's one report schema (package
// report); Table renders medians with their spread and the verdict of
// each criterion. The criteria are ratios and shares measured side by side
// in one run, never absolute times.
//
// The labs:
//
//   - CPUBound (1 ms and 20 ms of CPU per request), levee beside the
//     unprotected service: served at 0.9×, goodput at 1.5×, 2× and 5× of
//     the capacity, p50 at 2× against p50 at 0.2×, recovery after each
//     overload (issue 16).
//   - Tenants: 3× spread evenly over 2,000 tenant ids beside the same load
//     from one (issue 14).
//   - Ladder: 2× spread evenly over the four criticalities beside the same
//     load with no criticality (issue 16).
//   - Neighbour: one tenant at 5× beside nine at 0.3× in all (issue 16).
//
// Every loopback client has the same address, so by default the backend
// sees one tenant (its /24) and caps every criticality at CRITICAL: the
// Levee backend of the tenant and criticality labs trusts 127.0.0.0/8
// (backend.LeveeOptions.Trust), which honours Levee-Criticality in full
// and believes Levee-Tenant, and the clients send both (load.Mix). Each
// Lab says in its Setup how the tenant of a request is set.
//
// RejectionCost measures the server CPU one rejection costs: a rejection-
// only phase against a backend forced to refuse everything, its process
// CPU (from /proc) divided by the requests it answered.
//
// The realtime tests of this package assert the acceptance criteria; see
// their documentation for the commands.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), lab is a tool in the tools module
// (github.com/levee-dev/levee/tools): it imports package levee, the loopback
// harness and its parts (tools/loopback, tools/backend, tools/load,
// tools/report), and only the bench/ module imports it.
package lab
