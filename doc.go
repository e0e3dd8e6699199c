// Package levee is the shared vocabulary of the levee overload-protection
// toolkit: request criticality, tenant and attempt carried in a context, the
// typed rejection error every levee component returns, the Signal
// interface through which resource readings reach the admission controller,
// and the Pauser through which a client's wait between attempts takes its
// server-side request out of the server's count of requests in the handler.
//
// levee keeps a service serving at its capacity when demand exceeds it and
// stops one overloaded service from dragging its neighbours into an
// avalanche. The policies live in sub-packages:
//
//   - admit: server-side admission control (shed by resources, lowest
//     criticality and heaviest tenant first, unmeetable deadlines first of all);
//   - pressure: resource signals (process CPU against the cgroup quota, Go
//     scheduler latency, queueing delay and concurrency);
//   - limit: adaptive concurrency limits;
//   - degrade: graceful degradation levels that handlers read from the context;
//   - retry: budgeted retries with jittered exponential backoff;
//   - throttle: client-side adaptive throttling (Google SRE, ch. 21);
//   - leveehttp, leveegrpc, leveeprom: adapters for net/http, gRPC and Prometheus.
//
// This package depends on the standard library only and holds no state.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), package levee
// is the vocabulary at the bottom: it imports the standard library only, and
// every other package of the toolkit, policies, adapters and tools alike,
// speaks its types. The leaves beside it live under internal/ (the wire
// codec, tenant accounting, cgroup readers, smoothing, the option
// convention and the time base of the lock-free windows).
package levee
