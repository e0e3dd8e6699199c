// Package goodput compares, over loopback, what a CPU-bound Go server
// still serves when demand exceeds its capacity, protected in turn by
// levee, go-kratos/aegis BBR, failsafe-go's adaptive limiter, and nothing.
//
// It reuses levee's loopback harness (tools/loopback): the backend is a
// separate process with GOMAXPROCS=1 pinned to one CPU, burning real CPU
// per request (tools/backend); an open-loop generator pinned to the
// other CPU drives naive clients (1 s timeout per attempt, 2 immediate
// retries) through a schedule of 0.7×, 2×, 0.5×, 5×, 0.5× the measured
// capacity. The peers are plugged into the backend as HTTP middleware
// (Wraps, registered with loopback.HijackWith), so levee's own module never
// imports them.
//
// The comparison is a test that only runs when asked (about 5 minutes), and
// writes table.md for cmd/benchreport:
//
//	LEVEE_BENCH_GOODPUT=1 go test -run TestGoodput -v -timeout 15m ./goodput
//
// For a narrower look: LEVEE_BENCH_WORK (CPU costs, default "1ms,20ms"),
// LEVEE_BENCH_PROTECTION (e.g. "none,levee,failsafe"),
// LEVEE_BENCH_SKIP_REJECT=1 (no pure-rejection phase) and
// LEVEE_BENCH_PROGRESS=1 (the generator's progress once a second). The log
// prints, for every levee run, its controller's shed level, admitted
// fraction and signals second by second.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands) the bench/ module sits beside the commands, at the top: it
// imports levee's adapters and tools/loopback together with its peers
// (failsafe-go, aegis), in a module of its own outside the workspace, so that
// neither the library nor the tools carry the peers' dependencies.
package goodput
