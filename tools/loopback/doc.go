// Package loopback is the harness of levee's demo and loopback checks: it
// re-executes the current binary into two child processes on this machine
// and makes one overload the other over real sockets.
//
//   - The backend child (package backend) runs with GOMAXPROCS=1 and every
//     thread pinned to the first allowed CPU (sched_setaffinity), serving
//     CPU-bound requests, unprotected or behind levee.
//   - The load generator child (package load) is pinned to the second
//     CPU and drives an open-loop schedule of phases with keep-alive
//     connections, as naive clients (per-attempt timeout, immediate
//     retries, no budget) or levee clients (leveehttp.NewTransport).
//
// The first backend started for a cost of work calibrates it (the Spin
// count that takes that CPU time on its CPU); every later backend of the
// same parent runs that count, so that a capacity measured with one
// backend and a goodput measured with another compare the same work.
// Calibrated and KeepCalibrated share that count with a harness that
// starts backends of its own (the gRPC lab's, so that its gRPC and HTTP
// columns compare the same work too).
//
// The parent sends each child its configuration as one JSON line on stdin
// and reads JSON lines (ready, progress, report) from its stdout. Children
// never outlive the harness: they die with the parent (Pdeathsig), exit when
// their stdin closes, and exit after a hard time limit. Hijack must be
// called first thing in main (or TestMain) so that a re-executed child runs
// its role instead of the program.
//
// Run runs one configuration with fresh children; Capacity measures the
// unprotected peak with a closed loop; StartBackend starts a backend child
// alone, for load driven from this process (pinned away from it with
// PinSelf); Result.Run turns the two sides' reports into a run of levee's
// one report schema (package report), whose figures (recovery, server
// recovery, wasted work, peak) package report defines.
//
// The loopback check of levee's protection and the checks of levee load
// (a plan against a closed loop, metastability, a 1 s stall, a drill past
// the threshold, the generator's cost) are build-tagged tests:
//
//	go test -tags realtime -run TestLoopback -v -timeout 20m ./tools/loopback/
//	go test -tags realtime -run TestLoad -count=1 -v -timeout 30m ./tools/loopback/
//
// Config.Mix gives the generator's arrivals criticalities and tenants,
// Config.Levee sets up the Levee backend beyond its defaults (trusted
// networks, status page, goroutines signal, a forced overload), and
// Config.TraceCPU reads the backend's CPU time from /proc during the run.
// The labs built on the harness are packages of their own: lab (variants
// side by side: CPU-bound shapes, the cost of a rejection, tenants, the
// criticality ladder, a noisy neighbour), soak (minutes of overload with
// rotating tenants and hostile input) and slowdep (a slow dependency).
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), loopback is a tool in the tools module
// (github.com/levee-dev/levee/tools): it imports tools/backend, tools/load,
// tools/report and golang.org/x/sys/unix, and no policy or adapter directly
// (the backend brings levee); its labs (lab, soak, slowdep, limits),
// tools/grpclab, the command's demo in cmd/ and the bench/ module build on it.
package loopback
