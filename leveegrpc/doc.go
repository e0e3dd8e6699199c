// Package leveegrpc brings levee's overload protection to gRPC: admission
// control on the server (a tap handle that rejects before anything is
// decoded, and unary and stream interceptors) and throttling, budgeted
// retries and propagation on the client, speaking the status codes,
// trailers and status details gRPC clients already understand.
//
// # Server
//
// One call builds and starts everything (configuration, signals,
// admission controller, status page, metrics; see Protect):
//
//	p, err := leveegrpc.Protect(ctx)
//	srv := grpc.NewServer(p.ServerOptions()...)  // tap, interceptors, stats handler
//	go p.HTTP().ListenAndServe(":9090")          // status page, metrics
//
// or, explicitly, with a controller of your own:
//
//	s := leveegrpc.NewServer(controller,
//		leveegrpc.WithQueueDelay(set.Queue), leveegrpc.WithConcurrency(set.Concurrency))
//	srv := grpc.NewServer(s.ServerOptions()...)
//
// Each request is admitted exactly once, whichever parts are installed:
//
//   - InHandle (grpc.InTapHandle) runs on the connection's reader goroutine
//     when the request's headers arrive, before gRPC creates the stream or
//     reads a message: the cheapest rejection there is. It has no hook at
//     the end of the stream, so it hands the ticket it took to the
//     interceptors through the context it returns (an unexported key); the
//     interceptor that finds it does not admit again and releases the
//     ticket when the handler returns. If no interceptor runs (none
//     installed, unknown method, a unary message that never arrived, a
//     stream aborted before its handler) a reaper releases the ticket
//     at most 200 ms after gRPC cancelled the stream's context, which it does
//     whenever a stream ends. (The tap pushes each ticket on a lock-free
//     stack; a goroutine runs only while tickets are outstanding. A
//     context.AfterFunc per request would cost five allocations.)
//   - UnaryServerInterceptor and StreamServerInterceptor admit the request
//     themselves when the tap did not, make every admitted call wait in
//     the controller's run queue (admit.Ticket.Wait: the tap's calls too,
//     so that bounded concurrency holds for gRPC as for HTTP), put its
//     levee.Call and degradation level (degrade.FromContext) in the
//     handler's context, release the ticket when the handler returns (with
//     the handler's error, so the controller learns about downstream
//     overload), and map the handler's levee rejections (the mid-tier
//     mapping below). A stream holds its run slot only until its handler
//     first receives or sends a message: the run queue bounds and orders
//     stream openings, while a stream's life is its caller's.
//   - StatsHandler (grpc.StatsHandler) feeds the queue-delay signal
//     (WithQueueDelay) with each call's wait from the tap's entry, when its
//     headers have been read, to the start of the goroutine gRPC runs it
//     on: under CPU overload a gRPC server's queue is there, new streams
//     waiting for a core. A client sending its message slowly after its
//     headers cannot lengthen it. The tap's entry is also the arrival the
//     caller's budget counts from.
//
// The request's levee.Call and deadline come from its metadata by the same
// rules as leveehttp's (package internal/inbound; internal/wire parses the
// values): levee-criticality, levee-tenant and levee-attempt. Nobody is
// trusted by default (WithTrust opts callers in): an untrusted caller may
// lower its criticality but never raise it above CRITICAL, and its tenant
// is WithTenant's answer or else its network prefix (/24, /64), so
// rotating ids buys nothing; long or non-ASCII ids are hashed; its
// levee-attempt is ignored (only trusted callers' retries count towards the
// retry share that turns rejections into "no-retry"). The
// deadline is the earliest of gRPC's own (grpc-timeout), levee-timeout-ms
// and x-envoy-expected-rq-timeout-ms (malformed values ignored, above 24 h
// clamped); a budget ≤ 0 is answered DEADLINE_EXCEEDED at once. The
// controller rejects work whose deadline has passed or cannot be met,
// judged by the service time it learns per route; give it
// admit.WithRoute(leveegrpc.Method) so that it learns one per method.
// Streams never feed that table (their duration is the caller's choice).
// The gRPC health service is never shed (WithExempt).
//
// # Status mapping
//
// One table from levee.Reason to gRPC, for the server's own rejections and
// for the mid-tier mapping of a handler's error:
//
//	situation                          code                pushback trailer¹   status details²
//	overloaded, retry later            UNAVAILABLE         <ms>                ErrorInfo "overloaded", RetryInfo <delay>
//	overloaded, don't retry            UNAVAILABLE         -1                  ErrorInfo "overloaded; no-retry"
//	tenant over quota                  RESOURCE_EXHAUSTED  <ms>                ErrorInfo "quota", RetryInfo <delay>
//	deadline passed or unmeetable      DEADLINE_EXCEEDED   —                   ErrorInfo "deadline; no-retry"
//	mid-tier, downstream overloaded³   UNAVAILABLE         -1                  ErrorInfo "overloaded; no-retry"
//	mid-tier, throttled or no budget⁴  UNAVAILABLE         -1                  ErrorInfo "overloaded; no-retry"
//	mid-tier, downstream quota         RESOURCE_EXHAUSTED  <downstream ms>     ErrorInfo "quota", RetryInfo <delay>
//	mid-tier, downstream deadline      DEADLINE_EXCEEDED   —                   ErrorInfo "deadline; no-retry"
//
// ¹ grpc-retry-pushback-ms (gRFC A6), sent by the interceptors only: the
// tap ends the stream before any trailer can be written, so a tap rejection
// carries its delay and "no-retry" in the status details alone. grpc-go's
// built-in retry reads the trailer but not the details: behind a tap it
// retries with its own backoff. levee clients read both. The delay is the
// controller's advice (DefaultRetryAfter when it gives none), jittered by
// ±25% so that callers rejected together do not return together.
//
// ² google.rpc.ErrorInfo with domain ErrorDomain, reason OVERLOADED, QUOTA
// or DEADLINE and metadata InfoReject (the Levee-Reject header value) and
// InfoRetryAfterMs; google.rpc.RetryInfo only when the caller may retry.
//
// ³ after this tier's own retries, or when the downstream said no-retry:
// only the layer directly above the overloaded one retries.
//
// ⁴ a call refused by the local adaptive throttle, or a retry refused by
// the retry budget.
//
// The status message is the rejection's text, e.g. "levee: rejected:
// overloaded; retry after 1.2s". A rejection never arrives as Unknown or
// PermissionDenied: the tap always returns a status error.
//
// Status, Pushback and Rejection expose the table for other code; Error
// applies the mid-tier mapping for servers without the interceptors.
//
// # Client
//
//	c := leveegrpc.NewClient(leveegrpc.WithPolicy(retry.Policy{}))
//	cc, err := grpc.NewClient(target, append(c.DialOptions(), creds)...)
//
// For each call the client interceptors
//
//   - bound the deadline: the caller's (without one, unary calls get the
//     policy's timeout, retry.DefaultTimeout), minus a margin (WithMargin,
//     at most a tenth of the time left), sent by gRPC itself as
//     grpc-timeout; a call with less than a millisecond left fails at once
//     with DEADLINE_EXCEEDED;
//   - ask the target's adaptive throttle (throttle.Group, one per
//     cc.Target() by default): a refused call never touches the network and
//     fails with a Throttled rejection (UNAVAILABLE "no-retry" upward);
//   - send the context's levee.Call as levee-criticality, levee-tenant and
//     levee-attempt, so a mid-tier's outgoing calls inherit the incoming
//     criticality and tenant;
//   - report each attempt's outcome to the throttle: levee's overload and
//     quota rejections and calls that got no answer in time count against
//     the backend; answers count for it; a plain UNAVAILABLE (connection
//     refused or lost) and a call its caller abandoned count for nothing;
//   - retry unary calls as the retry.Policy and its budget allow, waiting
//     at least the server's pushback (trailer, RetryInfo or ErrorInfo), never
//     after "no-retry" (-1), a quota rejection without a delay, or a
//     deadline. A retryable overload comes only from a server's admission,
//     before the handler ran, so it is retried even for methods marked
//     WithNotIdempotent; a plain UNAVAILABLE without levee's marks
//     (connection lost, server stopping) only for idempotent ones. Streams
//     retry only their establishment: a rejection arriving on RecvMsg is
//     returned, not retried.
//
// A failed call returns the call's own error, or for a levee rejection an
// error that carries a *levee.RejectedError (levee.AsRejected,
// errors.Is(err, levee.ErrOverloaded)) and whose gRPC status is the
// mid-tier mapping: a handler that returns it as it is answers its own
// caller correctly. After the client gave up retrying an overload the
// rejection it carries first is "overloaded; no-retry" (what its caller
// must do); the server's own answer is the *retry.GiveUpError's Err. A
// stream's rejection, never retried by levee, is the server's own.
//
// # grpc-go's built-in retry
//
// grpc-go retries by itself when the service config has a retryPolicy
// (and then honours grpc-retry-pushback-ms, -1 included), and retries
// transparently a request that never left the client. Both layers retrying
// multiplies the attempts (3 × 3 = 9 per call): use one. DialOptions adds
// grpc.WithDisableRetry() when levee retries; to keep grpc-go's retry
// instead, use retry.Policy{MaxAttempts: 1} (levee still throttles and
// propagates). Transparent retries stay on either way; they add no load to
// a server that never saw the request. grpc-go's retry does not see a tap
// rejection's delay or "no-retry", which live in the status details only
// (TestGRPCRetryInterplay: it retries a tap's "no-retry" up to its
// maxAttempts, and honours the interceptors' -1). With grpc-go v1.85's
// retry on, a tap rejection that arrives before the client has written the
// request message can also surface as code Unknown, "max retries
// exhausted: ... EOF", instead of its status: one more reason to let levee
// retry.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), leveegrpc is
// an adapter in a module of its own (github.com/levee-dev/levee/leveegrpc),
// so that only services that use gRPC carry google.golang.org/grpc: it joins
// gRPC to the policies (admit, degrade, retry, throttle) and to the wire
// codec it shares with leveehttp, and never imports the tools or the command.
package leveegrpc
