package leveehttp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/outbound"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// Transport defaults.
const (
	// DefaultMargin is the most a Transport shaves off the time left before
	// sending it as Levee-Timeout-Ms, never more than a tenth of the time
	// left: the response must still travel back while the caller waits.
	// It is levee's one client margin, shared with leveegrpc (see
	// internal/outbound for why 10 ms).
	DefaultMargin = outbound.DefaultMargin
	// DefaultDrainLimit is how many bytes of a discarded response body a
	// Transport reads so that the connection can be reused; larger bodies
	// are closed unread (the connection is dropped instead).
	DefaultDrainLimit = 4 << 10
)

// TransportOption configures NewTransport.
type TransportOption func(*transportConfig)

type transportConfig struct {
	policy     retry.Policy
	throttles  *throttle.Group
	noThrottle bool
	margin     time.Duration
	safe       func(*http.Request) bool
	now        func() time.Time
	wait       func(ctx context.Context, d time.Duration) error
	names      *HeaderNames
	hosts      []hostPattern            // WithHosts; nil: not set
	scope      func(*http.Request) bool // WithScope; nil: not set
}

// WithTransportHeaderNames renames the headers the Transport writes and
// reads (see HeaderNames); they must match the server's. Default:
// the Header* constants.
func WithTransportHeaderNames(n HeaderNames) TransportOption {
	return func(c *transportConfig) { c.names = n.canonical() }
}

// WithPolicy sets the retry policy: attempts, backoff, budget (nil: the
// process-wide retry.DefaultBudget) and the Timeout applied when a request's
// context has no deadline. Default: the zero retry.Policy (3 attempts, full
// jitter from 100ms, retry.DefaultTimeout). MaxAttempts 1 disables retries.
func WithPolicy(p retry.Policy) TransportOption {
	return func(c *transportConfig) { c.policy = p }
}

// WithThrottle sets the group of per-host adaptive throttles, for example
// to share one among Transports or to set K. Keys are host:port, in lower
// case, without a trailing dot and with the scheme's default port made
// explicit (https://API.example/ and https://api.example:443/ share one);
// a host that is not printable ASCII, or longer than 128 bytes, is keyed
// by its hash, so that every key is a valid, bounded metric label. nil
// disables local throttling. Default: a new throttle.NewGroup() per
// Transport.
func WithThrottle(g *throttle.Group) TransportOption {
	return func(c *transportConfig) { c.throttles, c.noThrottle = g, g == nil }
}

// WithMargin sets the most shaved off the time left before it is sent as
// Levee-Timeout-Ms (default DefaultMargin; never more than a tenth of the
// time left). Negative values count as 0.
func WithMargin(d time.Duration) TransportOption {
	return func(c *transportConfig) { c.margin = max(d, 0) }
}

// WithRetrySafe sets the function that says whether a request with a
// non-idempotent method (POST, PATCH, ...) may nevertheless be retried, for
// example because the server deduplicates it by a key. Requests with an
// Idempotency-Key or X-Idempotency-Key header are retry-safe already, as in
// net/http. Default: none other.
func WithRetrySafe(f func(*http.Request) bool) TransportOption {
	return func(c *transportConfig) { c.safe = f }
}

// Transport is the client side of levee for net/http. Build it with
// NewTransport.
type Transport struct {
	next http.RoundTripper
	cfg  transportConfig
}

// NewTransport returns a Transport that sends requests through next
// (nil: http.DefaultTransport). For each request it:
//
//   - passes a request to a host outside its scope (WithHosts, WithScope)
//     to next untouched, and sends the tenant id only to hosts it names;
//   - applies the retry Policy's Timeout when the context has no deadline,
//     so no call waits forever for a response (the body the caller then
//     reads is not bounded by it);
//   - refuses locally, without touching the network, a request with less
//     than a millisecond left after the margin (a Deadline rejection), or
//     one the host's adaptive throttle refuses (a *levee.RejectedError,
//     Reason Throttled);
//   - sends the context's criticality, tenant, the attempt number and the
//     time left minus a margin (at most a tenth of it) as
//     Levee-Criticality, Levee-Tenant, Levee-Attempt and Levee-Timeout-Ms,
//     on a copy of the request;
//   - turns a 503, 429 or 504 carrying Levee-Reject into a
//     *levee.RejectedError (its RetryAfter from Levee-Retry-After-Ms, else
//     Retry-After; none when it says no-retry), draining (up to
//     DefaultDrainLimit bytes) and closing the response body; any other
//     response is returned as it came;
//   - reports each attempt's outcome to the throttle: overload and quota
//     rejections and attempts without an answer in time count against the
//     host; any other answer counts for it; failures that never reached it
//     (connection refused or reset, DNS) and attempts the caller abandoned
//     count for nothing;
//   - retries as the Policy and its budget allow: only transient failures
//     (overload without no-retry, quota after its delay, connections
//     refused before sending), only idempotent or retry-safe requests
//     (connection refusals excepted), only when the body can be replayed
//     through Request.GetBody (or there is none), waiting max(backoff,
//     server's delay) and never past the deadline; with
//     Policy.AttemptTimeout each attempt also has its own deadline (sent
//     as its Levee-Timeout-Ms), and an attempt that runs out of it while
//     the call has time left is retried.
//
// A levee rejection that is not retried is returned as a
// *levee.RejectedError; a retryable failure this layer gave up on
// (attempts, budget or deadline exhausted) as a *retry.GiveUpError, which
// for an overload says "overloaded; no-retry" to levee.AsRejected (only
// the layer directly above the rejecting one retries) and keeps the
// server's own answer in its Err. http.Client wraps either in a
// *url.Error. When the request's context belongs to a request served by a
// levee Handler, the rejection is also recorded there (see the mid-tier
// mapping in the package documentation).
//
// The caller's request is never modified. The Transport is safe for
// concurrent use.
func NewTransport(next http.RoundTripper, opts ...TransportOption) *Transport {
	t := &Transport{next: next, cfg: transportConfig{margin: DefaultMargin}}
	if t.next == nil {
		t.next = http.DefaultTransport
	}
	for _, o := range opts {
		o(&t.cfg)
	}
	if t.cfg.throttles == nil && !t.cfg.noThrottle {
		t.cfg.throttles = throttle.NewGroup()
	}
	if t.cfg.now == nil {
		t.cfg.now = time.Now
	}
	if t.cfg.wait == nil {
		t.cfg.wait = outbound.Sleep
	}
	if t.cfg.names == nil {
		t.cfg.names = &defaultNames
	}
	return t
}

// Unwrap returns the RoundTripper requests are sent through.
func (t *Transport) Unwrap() http.RoundTripper { return t.next }

// CloseIdleConnections closes the idle connections of the next
// RoundTripper, if it has such a method.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	inScope, tenant := t.scope(req)
	if !inScope {
		return t.next.RoundTrip(req)
	}
	ctx := req.Context()
	call := levee.CallFrom(ctx)
	if !call.Criticality.Valid() {
		call.Criticality = levee.Critical
	}
	if !tenant {
		call.Tenant = ""
	}
	// Without a deadline the Policy's Timeout bounds the wait for a
	// response (attempts and retries), not the reading of its body: a
	// timer that is stopped once the response arrives, not a deadline.
	var (
		expire *time.Timer
		cancel context.CancelCauseFunc
		now    = t.cfg.now()
		soft   time.Time
	)
	if _, ok := ctx.Deadline(); !ok {
		timeout := t.cfg.policy.Timeout
		if timeout <= 0 {
			timeout = retry.DefaultTimeout
		}
		soft = now.Add(timeout)
		ctx, cancel = context.WithCancelCause(ctx)
		expire = time.AfterFunc(timeout, func() { cancel(context.DeadlineExceeded) })
	}
	resp, err := t.roundTrip(ctx, req, call, soft)
	if cancel != nil {
		expire.Stop()
		switch {
		case err != nil:
			// The parent has no deadline: a cause of DeadlineExceeded is
			// the timer's.
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) && asRejected(err) == nil {
				err = &noAnswerError{timeout: soft.Sub(now), err: err}
			}
			cancel(nil)
		case resp.Body == nil:
			cancel(nil)
		default:
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
		}
	}
	if err != nil {
		if rej := asRejected(err); rej != nil {
			if st := stateFrom(req.Context()); st != nil {
				st.downstream.CompareAndSwap(nil, rej)
			}
		}
	}
	return resp, err
}

// noAnswerError is the error of a request without a deadline that got no
// response within the Policy's Timeout.
type noAnswerError struct {
	timeout time.Duration
	err     error
}

func (e *noAnswerError) Error() string {
	return "leveehttp: no response within the retry policy's timeout " + e.timeout.String() + ": " + e.err.Error()
}

// Unwrap returns context.DeadlineExceeded and the transport's error.
func (e *noAnswerError) Unwrap() []error { return []error{context.DeadlineExceeded, e.err} }

// roundTrip runs the attempt loop (internal/outbound) for req, within
// soft when it is set (see RoundTrip).
func (t *Transport) roundTrip(ctx context.Context, req *http.Request, call levee.Call, soft time.Time) (*http.Response, error) {
	hasBody := req.Body != nil && req.Body != http.NoBody
	oc := outbound.Call{
		Policy:      t.cfg.policy,
		Criticality: call.Criticality,
		Deadline:    soft,
		Margin:      t.cfg.margin,
		Now:         t.cfg.now,
		Sleep:       t.cfg.wait,
		// Without GetBody the body is gone after one attempt: a retry
		// would send nothing or garbage.
		OneShot:  hasBody && req.GetBody == nil,
		Classify: markUnsent,
	}
	oc.Policy.NotIdempotent = !t.idempotent(req)
	if t.cfg.throttles != nil {
		oc.Throttle = t.cfg.throttles.Get(throttleKey(req.URL.Scheme, req.URL.Host))
	}
	var (
		resp *http.Response
		sent bool // the caller's body was handed on (and will be closed)
	)
	err := oc.Run(ctx, func(a outbound.Attempt) error {
		body := req.Body
		if a.N > 0 && hasBody {
			b, err := req.GetBody()
			if err != nil {
				return err
			}
			body = b
		}
		sent = true
		r, err := t.attempt(ctx, req, body, call, a)
		resp = r
		return err
	})
	if !sent && req.Body != nil {
		_ = req.Body.Close() // refused locally: RoundTrip still closes the body
	}
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// markUnsent marks the error of a connection that could not be made
// (a dial error) as proof that nothing was sent.
func markUnsent(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return retry.Unsent(err)
	}
	return err
}

// attempt sends attempt a with body and returns the response to hand to
// the caller, or the attempt's error: a levee rejection read from the
// response (whose body it drains and closes), or next's error.
func (t *Transport) attempt(ctx context.Context, req *http.Request, body io.ReadCloser, call levee.Call, a outbound.Attempt) (*http.Response, error) {
	out := req.Clone(a.Ctx)
	out.Body = body
	if body == nil {
		out.Body = nil
	}
	h, names := out.Header, t.cfg.names
	h[names.Criticality] = wire.CriticalityValues[call.Criticality]
	if ten := wire.FormatTenant(call.Tenant); ten != "" {
		h[names.Tenant] = []string{ten}
	} else {
		delete(h, names.Tenant)
	}
	var buf [24]byte
	h[names.TimeoutMs] = []string{string(wire.AppendTimeoutMs(buf[:0], a.Left))}
	h[names.Attempt] = wire.AttemptValues[min(a.N, wire.MaxAttempt)]

	resp, err := t.next.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	rej := rejection(resp, t.cfg.now(), t.cfg.names)
	if rej == nil {
		if a.Ctx != ctx && resp.Body != nil {
			// The attempt's own deadline lasts while the body is read.
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: a.Release}
		} else {
			a.Release()
		}
		return resp, nil
	}
	drain(resp.Body) // before the loop releases the attempt's context
	return nil, rej
}

// rejection reads a levee rejection from resp: a 503, 429 or 504 carrying
// Levee-Reject. It returns nil for any other response, which goes to the
// caller as it came (a third party's own 429 or 504 included).
func rejection(resp *http.Response, now time.Time, names *HeaderNames) *levee.RejectedError {
	var reason levee.Reason
	_, noRetry, ok := wire.ParseReject(resp.Header[names.Reject])
	if !ok {
		return nil
	}
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		reason = levee.Overloaded
	case http.StatusTooManyRequests:
		reason = levee.Quota
	case http.StatusGatewayTimeout:
		reason = levee.Deadline
	default:
		return nil
	}
	// The status says what it is; Levee-Reject adds no-retry. A no-retry
	// rejection carries no delay to levee clients (as in leveegrpc): its
	// Retry-After is for browsers and people.
	d, pushNoRetry, dok := wire.ParseRetryAfterMs(resp.Header[names.RetryAfterMs])
	if !dok {
		d, _ = wire.ParseRetryAfter(resp.Header[wire.RetryAfter], now)
	}
	noRetry = noRetry || pushNoRetry
	if noRetry {
		d = 0
	}
	return &levee.RejectedError{Reason: reason, RetryAfter: d, NoRetry: noRetry}
}

func drain(b io.ReadCloser) {
	if b == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, b, DefaultDrainLimit)
	_ = b.Close()
}

func (t *Transport) idempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := req.Header["Idempotency-Key"]; ok {
		return true
	}
	if _, ok := req.Header["X-Idempotency-Key"]; ok {
		return true
	}
	return t.cfg.safe != nil && t.cfg.safe(req)
}

// cancelBody releases the Transport's own deadline when the caller is done
// with the response body.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
