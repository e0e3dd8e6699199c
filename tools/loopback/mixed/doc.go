// Package mixed is the loopback lab of overloads whose requests differ in
// who sends them and in how much they matter, on levee's one-core,
// CPU-bound service (tools/backend, 1 ms per request) driven by naive
// clients that retry twice at once with a 1 s deadline per attempt:
//
//   - Tenants: 3× the capacity spread evenly over 2,000 tenant ids, beside
//     the same load from one tenant id, in the same run: tenant fairness
//     must not cost goodput however many tenants share the overload, and
//     the server must serve the load after it again within 2 s.
//   - Ladder: 2× spread evenly over the four criticalities, beside the
//     same load with no criticality (every request CRITICAL): shedding
//     by criticality keeps CRITICAL_PLUS whole, sheds the SHEDDABLE
//     levels, and costs no goodput.
//   - Neighbour: one tenant at 5× beside nine others at 0.3× in all: the
//     nine are served.
//
// Every loopback client has the same address, so by default the backend
// sees one tenant (its /24) and caps every criticality at CRITICAL: the
// Levee backend of these labs trusts 127.0.0.0/8
// (backend.LeveeOptions.Trust), which honours Levee-Criticality in full
// and believes Levee-Tenant, and the clients send both (load.Mix). Each
// Lab says in its Setup how the tenant of a request is set.
//
// Run measures the capacity with a closed loop, then runs a Lab's
// variants with fresh processes, alternated, each repetition in the
// reverse order of the one before, and returns each run in levee's one
// report schema (package report). The figures each Lab defines are ratios
// and shares measured side by side in one run. The realtime tests of this
// package assert the acceptance criteria; see their documentation for the
// commands.
package mixed
