// Package goodput compares, over loopback, what a CPU-bound Go server
// still serves when demand exceeds its capacity, protected in turn by
// levee, go-kratos/aegis BBR, failsafe-go's adaptive limiter, and nothing.
//
// It reuses levee's loopback harness (internal/loopback): the backend is a
// separate process with GOMAXPROCS=1 pinned to one CPU, burning real CPU
// per request (internal/backend); an open-loop generator pinned to the
// other CPU drives naive clients (1 s timeout per attempt, 2 immediate
// retries) through a schedule of 0.7×, 2×, 0.5×, 5×, 0.5× the measured
// capacity. The peers are plugged into the backend as HTTP middleware
// (Wraps, registered with loopback.HijackWith), so levee's own module never
// imports them.
//
// The comparison is a test that only runs when asked, and writes
// table.md for cmd/benchreport:
//
//	LEVEE_BENCH_GOODPUT=1 go test -run TestGoodput -v -timeout 15m ./goodput
package goodput
