package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/outbound"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// forwarder is the http.RoundTripper under the Handler's
// httputil.ReverseProxy: for each attempt it takes a backend slot (the
// balancer, the queue, the backend's throttle), sends the request with
// levee's headers, judges the answer for the backend's limit, throttle and
// ejection, and retries on another backend when the rules allow.
type forwarder struct{ h *Handler }

// failKind says why the proxy itself answers instead of a backend.
type failKind uint8

const (
	failUnreachable failKind = iota // no connection (refused, dial timeout, DNS)
	failReset                       // the connection broke before the response headers
	failTimeout                     // no response headers within the timeout
	failNoBackend                   // nothing in rotation
	failOther
)

var failNames = [...]string{"unreachable", "reset", "timeout", "no-backend", "bad-gateway"}

// proxyError is a failed exchange with a backend, answered by the proxy
// (see Handler's error statuses).
type proxyError struct {
	kind    failKind
	backend string
	err     error
}

func (e *proxyError) Error() string {
	if e.backend == "" {
		return "proxy: " + failNames[e.kind] + ": " + e.err.Error()
	}
	return "proxy: " + failNames[e.kind] + " (" + e.backend + "): " + e.err.Error()
}

func (e *proxyError) Unwrap() error { return e.err }

// idempotent reports whether the request may be sent twice: the methods
// RFC 9110 calls idempotent, or an Idempotency-Key header.
func idempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, ok := r.Header["Idempotency-Key"]
	return ok
}

// attemptOverloaded is what retry.Attempts is told of a 503 it may retry:
// an overload without the backend's delay, which concerns that backend
// and not the next one (the delay is passed to the caller if the proxy
// gives up).
var attemptOverloaded = &levee.RejectedError{Reason: levee.Overloaded}

func (f *forwarder) RoundTrip(out *http.Request) (*http.Response, error) {
	h := f.h
	s := h.settings.Load()
	ctx := out.Context()
	call := levee.CallFrom(ctx)
	if !call.Criticality.Valid() {
		call.Criticality = levee.Critical
	}
	rs := stateFrom(ctx)
	if rs != nil {
		rs.fwd = true
	}
	now := h.now()
	deadline, hasDL := ctx.Deadline()
	bound := deadline
	if !hasDL {
		bound = now.Add(s.attemptBound)
	}
	p := s.policy
	p.NotIdempotent = !idempotent(out)
	var a retry.Attempts
	a.Init(p, now, bound)

	var body *replay
	if out.Body != nil && out.Body != http.NoBody && p.MaxAttempts > 1 {
		keep := 0
		if !p.NotIdempotent {
			keep = s.bufferBytes
		}
		body = newReplay(out.Body, keep)
	}
	var excl exclude
	for {
		n := a.Attempt()
		b, err := f.acquire(ctx, call.Criticality, excl, s)
		if err != nil {
			if errors.Is(err, errNoBackend) {
				return nil, &proxyError{kind: failNoBackend, err: err}
			}
			return nil, err
		}
		start := h.now()
		req, err := f.attemptRequest(out, b, n, call, start, deadline, hasDL, body, s)
		if err != nil {
			h.bal.release(b)
			return nil, err
		}
		if n > 0 {
			b.retried.Add(1)
		}
		resp, err := b.rt.RoundTrip(req)
		end := h.now()

		var o outcome
		var th outbound.Outcome
		var failure error // what retry.Attempts is told
		var kind failKind
		var rej *levee.RejectedError
		if err == nil {
			o, th, rej = judgeResponse(resp)
			f.readLoad(b, resp, end)
			if rej != nil && !rej.NoRetry {
				failure = attemptOverloaded
			}
		} else {
			o, th, failure, kind = judgeError(ctx, err)
			if errors.Is(err, syscall.ECONNREFUSED) {
				b.refused.Store(true)
			}
		}
		b.observe(o, end.Sub(start))
		th.Report(b.th, end, call.Criticality)
		if failure == nil && err == nil {
			return f.deliver(ctx, resp, b), nil
		}
		if err != nil && ctx.Err() != nil {
			h.bal.release(b)
			return nil, callerError(ctx)
		}

		wait, again := a.Next(end, failure)
		if again && (body == nil || body.replayable()) && h.bal.routable(exclude{b}) {
			if resp != nil {
				drain(resp.Body)
			}
			h.bal.release(b)
			if rs != nil {
				rs.retries++
			}
			excl = exclude{b}
			if outbound.Sleep(ctx, wait) != nil {
				return nil, callerError(ctx)
			}
			continue
		}
		if resp != nil {
			// A 503 not retried further. If this layer gave up on a
			// failure it would have retried, the caller hears "overloaded;
			// no-retry" with the backend's delay (only the layer above the
			// rejecting one retries); otherwise the backend's answer
			// passes through as it is.
			var gu *retry.GiveUpError
			if errors.As(a.Err(), &gu) && (n > 0 || gu.Stop != retry.StopAttempts) {
				drain(resp.Body)
				h.bal.release(b)
				return nil, &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: rej.RetryAfter, NoRetry: true}
			}
			return f.deliver(ctx, resp, b), nil
		}
		h.bal.release(b)
		return nil, &proxyError{kind: kind, backend: b.addr, err: err}
	}
}

// acquire takes a slot on a backend whose throttle lets the request
// through: a backend that throttles it is avoided once, then the request
// is refused locally (throttle.ErrThrottled: the backends reject much of
// what they get).
func (f *forwarder) acquire(ctx context.Context, c levee.Criticality, excl exclude, s *settings) (*backend, error) {
	h := f.h
	for {
		b, err := h.bal.acquire(ctx, c, excl, s.queueWait)
		if err != nil {
			if excl[1] != nil && errors.Is(err, errNoBackend) {
				return nil, throttle.ErrThrottled // nowhere else to go
			}
			return nil, err
		}
		if b.th == nil || b.th.AllowAt(h.now(), c) == nil {
			return b, nil
		}
		h.bal.release(b)
		if excl[1] != nil {
			return nil, throttle.ErrThrottled
		}
		excl[1] = b
	}
}

// judgeResponse says what a response tells of its backend: for the limit
// and ejection (o), for the throttle (th, by outbound's one rule: overload
// and quota rejections count against the backend), and, for a 503, the
// rejection with its no-retry and delay. Any 503 is an overload: backends
// without levee say so with a bare 503.
func judgeResponse(resp *http.Response) (o outcome, th outbound.Outcome, rej *levee.RejectedError) {
	switch resp.StatusCode {
	case http.StatusServiceUnavailable:
		_, noRetry, _ := wire.ParseReject(resp.Header[wire.Reject])
		d, pushNoRetry, ok := wire.ParseRetryAfterMs(resp.Header[wire.RetryAfterMs])
		if !ok {
			d, _ = wire.ParseRetryAfter(resp.Header[wire.RetryAfter], time.Now())
		}
		rej = &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: d, NoRetry: noRetry || pushNoRetry}
		return overloaded, outbound.Overload, rej
	case http.StatusTooManyRequests:
		return answered, outbound.Judge(errQuota), nil
	case http.StatusGatewayTimeout:
		if r, _, ok := wire.ParseReject(resp.Header[wire.Reject]); ok && r == levee.Deadline {
			return answered, outbound.Answered, nil // the backend judged the budget too short: it works
		}
		return overloaded, outbound.Overload, nil // no answer in time from its own upstream
	case http.StatusInternalServerError, http.StatusBadGateway:
		return failed, outbound.Answered, nil
	}
	return answered, outbound.Answered, nil
}

// errQuota stands for a backend's 429 when judging it for the throttle.
var errQuota = &levee.RejectedError{Reason: levee.Quota}

// judgeError classifies a failed exchange: what it says of the backend
// (o for the limit and ejection, th by outbound's one rule for the
// throttle), what retry.Attempts is told (marked Unsent when nothing left,
// Retryable when an idempotent request may go elsewhere), and how the
// proxy answers.
func judgeError(ctx context.Context, err error) (o outcome, th outbound.Outcome, marked error, kind failKind) {
	th = outbound.Judge(err)
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return overloaded, outbound.Overload, err, failTimeout // no answer within the caller's budget
		}
		return unreached, outbound.Unreached, err, failOther
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return failed, th, retry.Unsent(err), failUnreachable
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return failed, th, retry.Unsent(err), failUnreachable
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return overloaded, th, retry.Retryable(err), failTimeout
	}
	return failed, th, retry.Retryable(err), failReset
}

// callerError is the answer when the caller's context ended: its deadline
// (504) or its departure.
func callerError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return outbound.ErrLocalDeadline
	}
	return ctx.Err()
}

// readLoad records a Levee-Load reading and removes it from the response:
// it is for the balancer, not for the caller.
func (f *forwarder) readLoad(b *backend, resp *http.Response, now time.Time) {
	vals, ok := resp.Header[wire.Load]
	if !ok {
		return
	}
	if v, ok := wire.ParseLoad(vals); ok {
		b.setLoad(v, now)
	}
	delete(resp.Header, wire.Load)
}

// attemptRequest builds attempt n of out for backend b: its URL and body,
// and levee's headers (criticality, tenant, attempt, and the time left
// minus the margin in every timeout header the caller used).
func (f *forwarder) attemptRequest(out *http.Request, b *backend, n int, call levee.Call, now, deadline time.Time,
	hasDL bool, body *replay, s *settings) (*http.Request, error) {
	hd := out.Header
	if hasDL {
		left, ok := outbound.Left(now, deadline, s.margin)
		if !ok {
			return nil, outbound.ErrLocalDeadline
		}
		var buf [24]byte
		hd[wire.TimeoutMs] = []string{string(wire.AppendTimeoutMs(buf[:0], left))}
		if _, ok := hd[wire.GRPCTimeout]; ok {
			hd[wire.GRPCTimeout] = []string{wire.FormatGRPCTimeout(left)}
		}
		if _, ok := hd[wire.EnvoyTimeoutMs]; ok {
			hd[wire.EnvoyTimeoutMs] = []string{string(wire.AppendTimeoutMs(buf[:0], left))}
		}
	} else {
		delete(hd, wire.TimeoutMs)
		delete(hd, wire.GRPCTimeout)
		delete(hd, wire.EnvoyTimeoutMs)
	}
	hd[wire.Criticality] = wire.CriticalityValues[call.Criticality]
	if t := wire.FormatTenant(call.Tenant); t != "" {
		hd[wire.Tenant] = []string{t}
	} else {
		delete(hd, wire.Tenant)
	}
	hd[wire.Attempt] = wire.AttemptValues[min(max(n, call.Attempt), wire.MaxAttempt)]

	r := new(http.Request)
	*r = *out
	u := *out.URL
	u.Scheme, u.Host = "http", b.addr
	r.URL = &u
	if s.hostBackend {
		r.Host = b.addr
	}
	if body != nil {
		r.Body, r.GetBody = body.reader(), body.getBody
	}
	return r, nil
}

// deliver hands resp to the caller; b's slot is released when its body is
// closed. An upgraded connection (101) holds no slot: it is not a request
// in flight.
func (f *forwarder) deliver(ctx context.Context, resp *http.Response, b *backend) *http.Response {
	if resp.StatusCode == http.StatusSwitchingProtocols || resp.Body == nil {
		f.h.bal.release(b)
		return resp
	}
	resp.Body = &releaseBody{rc: resp.Body, f: f, b: b, ctx: ctx}
	return resp
}

// releaseBody releases its backend's slot when closed, and counts a body
// cut by the backend (a reset mid-response) as a failure.
type releaseBody struct {
	rc   io.ReadCloser
	f    *forwarder
	b    *backend
	ctx  context.Context
	done atomic.Bool
}

func (rb *releaseBody) Read(p []byte) (int, error) {
	n, err := rb.rc.Read(p)
	if err != nil && err != io.EOF && rb.ctx.Err() == nil {
		rb.b.resets.Add(1)
		rb.b.consec.Add(1)
	}
	return n, err
}

func (rb *releaseBody) Close() error {
	err := rb.rc.Close()
	if rb.done.CompareAndSwap(false, true) {
		rb.f.h.bal.release(rb.b)
	}
	return err
}

// drainLimit bounds what is read of a response the proxy discards, so
// that its connection can be reused.
const drainLimit = 64 << 10

func drain(b io.ReadCloser) {
	if b == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, b, drainLimit)
	_ = b.Close()
}
