// Package soak is the loopback soak of levee's server side (issue 14):
// minutes of overload with naive retrying clients, rotating tenants and
// hostile input, while the backend's memory, goroutines and descriptors
// are sampled; they must stay flat, and the backend must neither panic
// nor die.
//
// The backend is a child process (tools/loopback) with GOMAXPROCS=1 pinned
// to the first CPU, serving 1 ms CPU-bound requests behind levee
// (backend.Levee) with its status page and the goroutines signal
// (backend.LeveeOptions), trusting 127.0.0.1 only. The load comes from
// this process, pinned to the second CPU for the run (tools/load, open
// loop):
//
//   - naive clients (1 s per attempt, 2 immediate retries) at Load times
//     the closed-loop capacity, all four criticalities, half of them from
//     127.0.0.1 with trusted tenant ids from a window of 2,000 sliding by
//     50 ids a second (Rotation: a soak of 10 minutes names 32,000
//     tenants), half from rotating untrusted source addresses, 4,096 /24s
//     in 16 /16s of 127.0.0.0/8 (Sources; idle connections closed every
//     second so that new ones come from new addresses);
//   - on one request in HostileEvery, a hostile header set
//     (HostileHeaders: unknown, huge and repeated criticalities, absurd
//     and malformed timeouts, attempts, tenant ids of 64 KiB, invalid
//     UTF-8, new ids each time), counted by answer;
//   - raw exchanges on connections of their own (RawExchanges: malformed
//     request lines, control characters, folded and oversized heads,
//     pipelining, callers that leave), RawRate a second, and Slow slow
//     senders always open (a byte every 150 ms, the first byte then
//     500 ms, a trickled body, silent connections).
//
// The backend's RSS, threads and descriptors are read from /proc and its
// goroutines from its status JSON (the goroutines signal's value × its
// ceiling) every second; Flat judges each after the warm-up by the medians
// of windows against the median of the whole. The backend's handler
// panics are counted by its http.Server error log (backend.ErrorLog) and
// its stderr is checked for panics and race reports. A light phase after
// the overload shows whether it serves again.
//
// The realtime test of this package runs a minute (CI) or, with
// SOAK_DURATION=10m, the full soak; see its documentation.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), soak is a tool in the tools module
// (github.com/levee-dev/levee/tools): it imports package levee, the loopback
// harness and its parts (tools/loopback, tools/backend, tools/load,
// tools/report) and golang.org/x/sys/unix, and nothing imports it.
package soak
