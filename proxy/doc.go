// Package proxy is levee's load-balancing reverse proxy: the tier in front
// of services written in any language, where the founding text's
// avalanche runs. A classic load balancer marks a busy instance unhealthy
// (its health check waits in the same queue as its traffic and times
// out), moves its traffic to the next instance, which falls in turn, and
// floods each one the moment it comes back. This proxy treats overload as
// overload, never as failure, and sheds at the edge instead of failing
// over in a circle.
//
// Handler is an http.Handler built on httputil.ReverseProxy (which keeps
// streaming, trailers, upgrades and hop-by-hop headers as they are): New
// builds it from a Config, Run runs its control loop, active health checks
// and DNS re-resolution; the levee proxy command runs it from levee's
// configuration file (section "proxy", see WithSection).
//
// # A request's path
//
//  1. The proxy's own paths (probes, the status page, and what WithExempt
//     mounts: metrics, levee's status page, the admin endpoint) are served
//     outside admission: never shed.
//  2. The edge's leveehttp.Handler applies the configuration's route
//     rules (WithRouter, leveehttp.WithRouter's one rule): a route name,
//     and for an untrusted caller the criticality and tenant its route
//     gives it (it may still ask for less, never for more than CRITICAL);
//     trusted networks keep their levee headers. It admits the request
//     through the proxy's own admit.Controller (WithController): the
//     proxy's resources, quotas per tenant, deadlines from
//     Levee-Timeout-Ms, grpc-timeout and X-Envoy-Expected-Rq-Timeout-Ms.
//  3. The balancer takes a slot on a backend: power of two choices among
//     the backends in rotation with a free slot; the lower in-flight ÷
//     capacity × (1 + load) wins. A backend's capacity is its adaptive
//     limit times its slow-start weight; its load is its last Levee-Load,
//     fading with age. When every backend is full, the request waits in a
//     queue served by criticality, then arrival; the queue sheds the lowest
//     criticality first (503 overloaded with Retry-After), at once for a
//     newcomer that could not be served within its wait.
//  4. The backend's adaptive throttle (package throttle, K = 2) may refuse
//     it locally; the proxy then tries another backend once.
//  5. It is sent with levee's headers: criticality, tenant, attempt, and
//     the caller's time left minus a margin in every timeout header the
//     caller used. The body streams: the first retry.buffer_bytes are kept
//     so that an idempotent request can be sent again, never more.
//  6. The answer is judged: Levee-Load is read (and removed); a 503 or a
//     504, or no response headers in time, is overload (the limit backs
//     off, the throttle counts a rejection, nothing counts towards
//     ejection); a refused or reset connection, a 500 or a 502 is a
//     failure (towards ejection); anything else is an answer and a latency
//     sample.
//  7. Retries go to another backend, never the same one twice in a row,
//     only for an idempotent request (or one that provably never left:
//     connection refused), only after a connection failure, a reset or a
//     503 without no-retry, within the retry budget (10% + 60/min). When
//     the proxy gave up on overloaded backends, the caller hears
//     "overloaded; no-retry" with the backend's delay: only the layer
//     directly above the rejecting one retries. A 503 the proxy did not
//     retry (a POST, say) passes through as the backend said it.
//
// Answers the proxy gives instead of a backend carry Levee-Proxy-Error
// (HeaderError): 502 unreachable or reset, 504 timeout, 503 no-backend,
// and levee's rejections (shed, gave-up, deadline, quota).
//
// # Backends without levee
//
// A levee backend reports its load (Levee-Load) and rejects with 503
// overloaded; most backends do neither. The proxy keeps, for every
// backend, an adaptive concurrency limit learned from its latency and its
// overload answers alone: its baseline is the backend's no-queue latency,
// re-measured by a short probe at a quarter of the limit, so that a
// backend saturated for hours cannot teach it a queue as normal (the limit
// package's limiters would ratchet there, see adaptiveLimit). At its limit
// a backend is full, not failed: it gets no more, the others do, and when
// all are full the excess is shed at the edge, lowest criticality first.
//
// # Health without the avalanche
//
// Active health checks (health.path, each backend every health.every ±
// jitter) and passive outlier detection (outlier.consecutive_failures)
// eject a backend that fails; an ejection lasts outlier.base_ejection,
// doubling while it repeats. A check that times out while the backend is
// answering proxied requests, and a levee rejection, are "overloaded":
// alive. Never more than outlier.max_ejected_share of the backends
// (⌊share × n⌋, default 50%) are out at once; a failing backend above the
// cap stays in, last in preference. A backend back from an ejection, a
// restart (it refused connections and answers again) or discovery is
// ramped from balance.slow_start_floor of its limit to all of it over
// balance.slow_start, its limit learned anew.
//
// # Operations
//
// Apply (or ConfigTarget with a config.Reloader) changes everything but
// the fields tagged reload:"restart" while requests flow; removed
// backends drain. Drain makes the readiness probe fail before a graceful
// stop. Status reports every backend (state, in flight, capacity, limit,
// weight, load, baseline, ejections, throttle, outcomes) and route; the
// status page serves it as JSON or text; proxyprom.NewCollector exports
// it. Ejections, returns, restarts, discovery and reloads are
// logged with log/slog.
//
// # Cost
//
// The balancer's pick and release take no lock and allocate nothing
// (BenchmarkPick). A request costs about a dozen allocations more than
// through a bare httputil.ReverseProxy (BenchmarkServe); the proxy pools
// its copy buffers, which a bare ReverseProxy does not. Real-time
// comparisons with a bare ReverseProxy and nginx, and the founding text's
// cascade on loopback, are in bench/README.md (tools/proxylab).
//
// Within levee's layers (vocabulary and leaves → policies → adapters →
// tools → commands; imports point down only, checked by .ci/layers),
// proxy is an adapter beside leveehttp: it uses the standard library, the
// policies (retry, throttle; admit through leveehttp), config and
// leveehttp, and proxy/proxyprom exports it.
package proxy
