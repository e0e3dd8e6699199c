// Package proxylab is the loopback lab of levee's proxy: the founding
// text's failover cascade with backends of known capacity, a classic load
// balancer to compare against, and the overhead beside a bare
// httputil.ReverseProxy and nginx.
//
//   - Fixed is a backend of fixed capacity: Workers requests at a time,
//     each held Hold, the rest queued in arrival order however long (its
//     health path too), never looking at its callers' contexts: capacity
//     known without spending CPU, and the queue that makes a busy
//     instance look dead.
//   - Classic is the load balancer the avalanche runs through, on
//     httputil.ReverseProxy: round robin, backends taken out by failed
//     health checks or proxied errors and timeouts, no cap on how many.
//   - Start re-executes the test binary as a child process in a role
//     (RoleFixed, RoleBare, RoleClassic, RoleLevee; Hijack must run first
//     in TestMain); StartNginx runs Debian's nginx as an equivalent proxy.
//     Children die with their parent.
//   - Cascade runs the cascade through RoleClassic or RoleLevee, with an
//     optional kill and restart of a backend; Overhead measures CPU per
//     request and latency of the proxies side by side.
//
// The real-time checks are behind the build tag realtime (short by
// default; bench/proxy.sh runs the figures of record):
//
//	go test -tags realtime -run TestProxy -v ./tools/proxylab/
//
// TestCascadeVirtual runs the same cascade on virtual time
// (testing/synctest) in every go test.
//
// Layering: proxylab sits with the tools (tools/...); only cmd/ and bench/
// may import it.
package proxylab
