// Package leveehttp puts levee on both sides of net/http: NewHandler admits
// each request on a server through an admit.Controller, and NewTransport
// carries criticality, tenant, deadline and attempt to the next hop, retries
// within a budget, throttles itself per host and turns levee rejections back
// into *levee.RejectedError values.
//
// # Server
//
// One call protects a service (Protect): signals, admission controller,
// configuration with its reloads, status page, metrics and admin endpoint,
// arrival stamps on every connection, started and stopped with it:
//
//	p, err := leveehttp.Protect(ctx, mux)
//	if err != nil { ... }
//	defer p.Close()
//	err = p.ListenAndServe(":8080")
//
// Route names for per-route service times come from the ServeMux pattern
// (MuxRoute; WithRoute for other routers), route rules of the
// configuration apply through WithRouter, and WithResponder shapes
// rejections (ProblemJSON: RFC 9457). The explicit form:
//
//	ctl := admit.New(admit.WithSignals(cpu, sched))
//	go ctl.Run(ctx)
//	srv := &http.Server{
//		Handler:     leveehttp.NewHandler(mux, ctl),
//		ConnContext: leveehttp.ConnContext, // optional: see Listener
//	}
//	srv.Serve(leveehttp.Listener(ln))
//
// The Handler reads these request headers (gRPC uses the same names in
// lower case):
//
//	Levee-Criticality  CRITICAL_PLUS, CRITICAL (default), SHEDDABLE_PLUS,
//	                   SHEDDABLE, or the numbers 4..1. Untrusted callers may
//	                   lower their level, never raise it above CRITICAL.
//	Levee-Tenant       honoured from trusted callers only (WithTrust);
//	                   otherwise WithTenant's function or the caller's /24
//	                   (IPv4) or /64 (IPv6) prefix. Long ids are hashed.
//	Levee-Timeout-Ms   remaining budget in ms; grpc-timeout and
//	                   X-Envoy-Expected-Rq-Timeout-Ms count too. The minimum
//	                   of the valid ones wins, malformed ones are ignored,
//	                   ≤ 0 is answered 504 at once, > 24 h is clamped. The
//	                   request's deadline is the earlier of the server's and
//	                   arrival + budget.
//	Levee-Attempt      0 for a first attempt, 1, 2 for retries; honoured
//	                   from trusted callers only (a high share of retries
//	                   makes every overload rejection "no-retry": no single
//	                   untrusted caller may switch that on).
//
// Nobody is trusted by default: WithTrust opts callers in (for example by
// their mTLS identity). Health and readiness probes, GET or HEAD on exactly
// /healthz, /readyz or /livez (WithHealthPaths replaces the list), are
// never shed and are counted apart (Handler.Probes). Every rejection the
// Handler decides itself (a caller already gone, a budget already spent)
// is counted in the controller like its own (admit's CountRejected), so
// Snapshot.Rejected, the metrics and the status page see every rejection.
// Every levee header name can be changed (WithHeaderNames,
// WithTransportHeaderNames).
//
// Under overload a Go server queues requests in the kernel and the run
// queue before any middleware runs. Listener with ConnContext stamps the
// first bytes of each request on a keep-alive HTTP/1 connection, so that
// the caller's budget counts from its arrival and WithQueueDelay (for
// pressure.QueueDelay) sees the wait; see Listener for its limits.
//
// An admitted request then waits in the controller's run queue
// (admit.Ticket.Wait, admit.WithRunQueue) while the requests already
// running fill its bound: parked, in arrival order, leaving as soon as its
// caller goes away, and checked against its deadline before next runs.
//
// Rejections are written before next runs and before the body is read:
//
//	reason      status  headers
//	overloaded  503     Retry-After (s ≥ 1), Levee-Retry-After-Ms, Levee-Reject: overloaded[; no-retry]
//	quota       429     Retry-After (s ≥ 1), Levee-Retry-After-Ms, Levee-Reject: quota
//	deadline    504     Levee-Reject: deadline[; no-retry]
//	throttled   503     as overloaded, always "; no-retry"
//
// Retry-After and Levee-Retry-After-Ms are jittered by ±25% around the
// controller's advice so that clients rejected together do not return
// together. WithLoadHeader adds Levee-Load (max over signals of
// value ÷ target) to every response.
//
// # Client
//
//	client := &http.Client{Transport: leveehttp.NewTransport(nil,
//		leveehttp.WithHosts("*.svc.cluster.local"))} // the hosts that speak levee
//
// WithHosts (or WithScope) names the hosts that speak levee's protocol;
// requests to any other host, on the same http.Client, pass through
// untouched. Without it every host is treated as a levee host except that
// no tenant id is sent (it may be an API key). Only responses carrying
// Levee-Reject become errors: a third party's own 429 or 504 reaches the
// caller as it came, body included.
//
// The Transport sends the context's levee.Call (criticality, tenant), the
// attempt number and the time left minus a margin as Levee-Timeout-Ms; with
// no deadline on the context it applies the retry Policy's Timeout to the
// wait for the response (never to the reading of its body). It
// refuses locally, without touching the network, when the per-host adaptive
// throttle says so (*levee.RejectedError, Reason Throttled), retries
// idempotent requests within the Policy and its budget, honours
// Retry-After, Levee-Retry-After-Ms and no-retry, and returns levee
// rejections (503, 429 or 504 with Levee-Reject) as errors carrying a
// *levee.RejectedError, which http.Client wraps in a *url.Error: test with
// levee.AsRejected, errors.As or errors.Is. It shares its attempt loop,
// margin and outcome rules with leveegrpc's client (internal/outbound).
// Handler and Transport both have Unwrap methods returning what they wrap.
//
// # Mid-tier mapping
//
// A server that calls other services answers its own caller by this table
// (MidTier, Error). Only the layer directly above the rejecting one
// retries; everything above it is told not to.
//
//	downstream outcome (after this layer's retries)    this server answers
//	overloaded (503 Levee-Reject: overloaded)          503 overloaded; no-retry, downstream's delay
//	retry budget exhausted                             503 overloaded; no-retry
//	throttled locally (Reason Throttled)               503 overloaded; no-retry
//	quota (429)                                        429 quota, downstream's delay passed through
//	deadline (504, or context deadline/cancel)         504 deadline; no-retry
//	any other error (Error only)                       502 bad gateway
//
// Use it explicitly with Error(w, r, err), or let the Handler apply it: when
// a Transport call made with the request's context (or a context derived
// from it) ends in a levee rejection and the handler then answers with a
// status ≥ 500 (say a 502 from a proxy), the Handler answers with the
// table's status and headers instead. Either way the downstream rejection
// is the outcome reported to the admission controller (Ticket.Done), so it
// learns about downstream overload. A handler that recovers (serves from a
// cache) and answers < 500 is left alone and reports success.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), leveehttp is
// an adapter: it joins net/http to the policies (admit, degrade, retry,
// throttle) and the wire codec, imports nothing outside the standard library
// and levee's own packages, and is what the tools in tools/ and the command
// in cmd/ build on; it never imports them.
package leveehttp
