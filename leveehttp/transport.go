package leveehttp

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// Transport defaults.
const (
	// DefaultMargin is the most a Transport shaves off the time left before
	// sending it as Levee-Timeout-Ms (it never shaves more than a tenth of
	// the time left): the response must still travel back.
	DefaultMargin = 10 * time.Millisecond
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

// WithThrottle sets the group of per-host adaptive throttles (keyed by
// URL host:port), for example to share one among Transports or to set K.
// nil disables local throttling. Default: a new throttle.NewGroup() per
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
//   - applies the retry Policy's Timeout when the context has no deadline,
//     so no call waits forever;
//   - asks the host's adaptive throttle first and, when it refuses, returns
//     a *levee.RejectedError{Reason: Throttled} without touching the
//     network (each attempt counts as a request; anything but an overload
//     or quota rejection, or a network failure, counts as accepted);
//   - sends the context's criticality, tenant, the attempt number and the
//     time left minus a margin as Levee-Criticality, Levee-Tenant,
//     Levee-Attempt and Levee-Timeout-Ms, on a copy of the request;
//   - turns a 503 carrying Levee-Reject, a 429 or a 504 into a
//     *levee.RejectedError (its RetryAfter from Levee-Retry-After-Ms, else
//     Retry-After), draining (up to DefaultDrainLimit bytes) and closing the
//     response body;
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
// A final levee rejection is returned as a *levee.RejectedError, which
// http.Client wraps in a *url.Error. Once this layer has retried, an
// overload rejection is returned with NoRetry set: only the layer directly
// above the rejecting one retries. When the request's context belongs to a
// request served by a levee Handler, that rejection is also recorded there
// (see the mid-tier mapping in the package documentation).
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
		t.cfg.wait = sleepCtx
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

func sleepCtx(ctx context.Context, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// Shared header values, never modified: setting them does not allocate.
var (
	critValues = func() (v [levee.NumCriticalities][]string) {
		for c := range v {
			v[c] = []string{wire.FormatCriticality(levee.Criticality(c))}
		}
		return v
	}()
	attemptValues = func() (v [wire.MaxAttempt + 1][]string) {
		for n := range v {
			v[n] = []string{wire.FormatAttempt(n)}
		}
		return v
	}()
)

// errLocalDeadline is returned, without sending, when no time is left.
var errLocalDeadline = &levee.RejectedError{Reason: levee.Deadline, NoRetry: true}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	call := levee.CallFrom(ctx)
	if !call.Criticality.Valid() {
		call.Criticality = levee.Critical
	}
	now := t.cfg.now()

	cancel := context.CancelFunc(nil)
	if _, ok := ctx.Deadline(); !ok {
		timeout := t.cfg.policy.Timeout
		if timeout <= 0 {
			timeout = retry.DefaultTimeout
		}
		ctx, cancel = context.WithDeadline(ctx, now.Add(timeout))
	}
	deadline, _ := ctx.Deadline()
	resp, err := t.roundTrip(ctx, req, call, now, deadline)
	if cancel != nil {
		if err != nil || resp == nil || resp.Body == nil {
			cancel()
		} else {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
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

func (t *Transport) roundTrip(ctx context.Context, req *http.Request, call levee.Call, now, deadline time.Time) (*http.Response, error) {
	var th *throttle.Throttle
	if t.cfg.throttles != nil {
		th = t.cfg.throttles.Get(req.URL.Host)
	}
	p := t.cfg.policy
	p.NotIdempotent = !t.idempotent(req)
	hasBody := req.Body != nil && req.Body != http.NoBody
	replayable := !hasBody || req.GetBody != nil

	var a retry.Attempts
	a.Init(p, now, deadline)
	body := req.Body // the first attempt sends the caller's body
	for {
		n := a.Attempt()
		if n > 0 && hasBody {
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			body = b
		}
		resp, err := t.attempt(ctx, req, body, call, n, th)
		if err == nil {
			return resp, nil
		}
		now = t.cfg.now()
		if !replayable {
			// The body is gone: a retry would send nothing or garbage.
			return nil, final(err, n > 0)
		}
		wait, again := a.Next(now, err)
		if !again {
			if rej := asRejected(err); rej != nil {
				return nil, final(err, n > 0 || errors.Is(a.Err(), retry.ErrBudgetExhausted))
			}
			return nil, a.Err()
		}
		if werr := t.cfg.wait(ctx, wait); werr != nil {
			return nil, final(err, true)
		}
	}
}

// final returns err as the caller should see it: a levee rejection as a
// *levee.RejectedError, with NoRetry set for overload once this layer has
// retried (retried) so that nobody above retries again.
func final(err error, retried bool) error {
	rej := asRejected(err)
	if rej == nil {
		return err
	}
	if rej.Reason == levee.Overloaded && retried && !rej.NoRetry {
		return &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: rej.RetryAfter, NoRetry: true}
	}
	return rej
}

// attempt sends one attempt and returns the response to hand to the caller,
// or the error of a failed attempt (a levee rejection, a network error).
// It closes body on every path where next does not.
func (t *Transport) attempt(ctx context.Context, req *http.Request, body io.ReadCloser, call levee.Call, n int, th *throttle.Throttle) (*http.Response, error) {
	now := t.cfg.now()
	if th != nil {
		if err := th.AllowAt(now, call.Criticality); err != nil {
			closeBody(body)
			return nil, err
		}
	}
	if ctx.Err() != nil {
		closeBody(body)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ctx.Err()
		}
		return nil, errLocalDeadline
	}
	// The attempt's own deadline: the call's, or sooner with AttemptTimeout.
	actx, acancel := ctx, context.CancelFunc(func() {})
	deadline, _ := ctx.Deadline()
	if at := t.cfg.policy.AttemptTimeout; at > 0 && now.Add(at).Before(deadline) {
		deadline = now.Add(at)
		actx, acancel = context.WithDeadline(ctx, deadline)
	}
	left := deadline.Sub(now)
	left -= min(t.cfg.margin, left/10)
	if left < time.Millisecond {
		acancel()
		closeBody(body)
		return nil, errLocalDeadline
	}

	out := req.Clone(actx)
	out.Body = body
	if body == nil {
		out.Body = nil
	}
	h, names := out.Header, t.cfg.names
	h[names.Criticality] = critValues[call.Criticality]
	if call.Tenant != "" {
		if ten := wire.FormatTenant(call.Tenant); ten != "" {
			h[names.Tenant] = []string{ten}
		} else {
			delete(h, names.Tenant)
		}
	} else {
		delete(h, names.Tenant)
	}
	var buf [24]byte
	h[names.TimeoutMs] = []string{string(wire.AppendTimeoutMs(buf[:0], left))}
	h[names.Attempt] = attemptValues[min(n, wire.MaxAttempt)]

	resp, err := t.next.RoundTrip(out)
	if err != nil {
		ownTimeout := ctx.Err() == nil && actx.Err() != nil
		acancel()
		switch {
		case ownTimeout:
			// Only this attempt ran out of time: another may succeed. No
			// answer in time counts against the backend.
			if th != nil {
				th.DoneAt(t.cfg.now(), call.Criticality, false)
			}
			return nil, retry.Retryable(err)
		case ctx.Err() != nil:
			// The caller gave up: the attempt says nothing of the backend
			// and is left unreported.
			return nil, err
		}
		if th != nil {
			th.DoneAt(t.cfg.now(), call.Criticality, false)
		}
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			err = retry.Unsent(err)
		}
		return nil, err
	}
	end := t.cfg.now()
	rej := rejection(resp, end, t.cfg.names)
	if rej == nil {
		if th != nil {
			th.DoneAt(end, call.Criticality, true)
		}
		if actx != ctx && resp.Body != nil {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: acancel}
		} else {
			acancel()
		}
		return resp, nil
	}
	defer acancel() // after the drain below: a cancelled body cannot be drained
	if th != nil {
		th.DoneAt(end, call.Criticality, rej.Reason != levee.Overloaded && rej.Reason != levee.Quota)
	}
	drain(resp.Body)
	return nil, rej
}

// rejection reads a levee rejection from resp: a 503 with Levee-Reject, a
// 429 or a 504. It returns nil for any other response.
func rejection(resp *http.Response, now time.Time, names *HeaderNames) *levee.RejectedError {
	var reason levee.Reason
	_, noRetry, ok := wire.ParseReject(resp.Header[names.Reject])
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		if !ok {
			return nil
		}
		reason = levee.Overloaded
	case http.StatusTooManyRequests:
		reason = levee.Quota
	case http.StatusGatewayTimeout:
		reason = levee.Deadline
	default:
		return nil
	}
	// The status says what it is; Levee-Reject adds no-retry.
	d, pushNoRetry, dok := wire.ParseRetryAfterMs(resp.Header[names.RetryAfterMs])
	if !dok {
		d, _ = wire.ParseRetryAfter(resp.Header[wire.RetryAfter], now)
	}
	return &levee.RejectedError{Reason: reason, RetryAfter: d, NoRetry: noRetry || pushNoRetry}
}

func drain(b io.ReadCloser) {
	if b == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, b, DefaultDrainLimit)
	_ = b.Close()
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
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
