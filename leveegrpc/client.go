package leveegrpc

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// Client protects the calls a gRPC client makes: adaptive throttling per
// target, retries within a retry.Policy and its budget honouring the
// server's pushback, and propagation of the levee.Call (criticality,
// tenant, attempt) and of the deadline minus a margin. Build it with
// NewClient and install its interceptors (DialOptions); it is safe for
// concurrent use and one Client may serve many connections.
type Client struct {
	policy   retry.Policy
	throttle *throttle.Group
	margin   time.Duration
	key      func(cc *grpc.ClientConn, method string) string
	notIdem  func(method string) bool

	// now and sleep are the clock; tests replace them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithPolicy sets the retry policy of unary calls (and of stream
// establishment). Default: the zero retry.Policy (3 attempts, full jitter,
// the process-wide retry.DefaultBudget, retry.DefaultTimeout when the
// caller's context has no deadline). MaxAttempts 1 disables levee's retries,
// e.g. to leave them to grpc-go's retry policy (see the package
// documentation: never both).
func WithPolicy(p retry.Policy) ClientOption {
	return func(c *Client) { c.policy = p }
}

// WithThrottle sets the throttle group whose Throttle for each target
// (WithThrottleKey) decides locally, before a call touches the network,
// whether to send it. Default: a group built by throttle.NewGroup() for
// this Client. nil disables throttling.
func WithThrottle(g *throttle.Group) ClientOption {
	return func(c *Client) { c.throttle = g }
}

// WithThrottleKey sets the function naming the backend a call goes to, the
// key of its Throttle. Default: cc.Target(), one throttle per connection
// target. Keep the number of keys bounded (the group is).
func WithThrottleKey(f func(cc *grpc.ClientConn, method string) string) ClientOption {
	return func(c *Client) {
		if f != nil {
			c.key = f
		}
	}
}

// WithMargin sets how much is shaved off the caller's deadline before it is
// sent downstream (gRPC sends it as grpc-timeout), so that the answer,
// rejection included, arrives while the caller still waits. Default
// DefaultMargin; negative values count as 0. A call with less than the
// margin left fails at once with a Deadline rejection, without touching the
// network.
func WithMargin(d time.Duration) ClientOption {
	return func(c *Client) { c.margin = max(d, 0) }
}

// WithNotIdempotent names the methods (full names, "/package.Service/Method")
// that must not run twice: for them levee retries only failures that prove
// the request was never processed (a server's admission rejection, a
// connection refused), never a plain UNAVAILABLE, which may come after the
// handler ran. Default: every method is idempotent, or as the Policy's
// NotIdempotent says.
func WithNotIdempotent(f func(method string) bool) ClientOption {
	return func(c *Client) { c.notIdem = f }
}

// DefaultMargin is the deadline margin of a Client without WithMargin.
const DefaultMargin = 5 * time.Millisecond

// NewClient returns a Client configured by opts.
func NewClient(opts ...ClientOption) *Client {
	c := &Client{
		throttle: throttle.NewGroup(),
		margin:   DefaultMargin,
		key:      func(cc *grpc.ClientConn, _ string) string { return cc.Target() },
		now:      time.Now,
		sleep:    sleep,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// DialOptions returns the options that install c on a connection:
// grpc.WithChainUnaryInterceptor(c.UnaryClientInterceptor),
// grpc.WithChainStreamInterceptor(c.StreamClientInterceptor), and, when c
// retries (its Policy allows more than one attempt), grpc.WithDisableRetry()
// so that grpc-go's own retry does not multiply levee's.
func (c *Client) DialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(c.UnaryClientInterceptor),
		grpc.WithChainStreamInterceptor(c.StreamClientInterceptor),
	}
	if c.policy.MaxAttempts == 0 || c.policy.MaxAttempts > 1 {
		opts = append(opts, grpc.WithDisableRetry())
	}
	return opts
}

// policyFor returns the retry policy of method.
func (c *Client) policyFor(method string) retry.Policy {
	p := c.policy
	if c.notIdem != nil && c.notIdem(method) {
		p.NotIdempotent = true
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// bound returns ctx with the deadline to send downstream: the caller's
// minus the margin or, without one, now + the policy's timeout when
// defaultTimeout is set. It fails with a Deadline rejection when less than
// the margin is left.
func (c *Client) bound(ctx context.Context, now time.Time, defaultTimeout bool) (context.Context, context.CancelFunc, error) {
	dl, ok := ctx.Deadline()
	switch {
	case ok:
		dl = dl.Add(-c.margin)
		if !dl.After(now) {
			return ctx, nil, deadlineRejection
		}
		if c.margin == 0 {
			return ctx, noCancel, nil
		}
		return &shavedCtx{Context: ctx, dl: dl}, noCancel, nil
	case defaultTimeout:
		t := c.policy.Timeout
		if t <= 0 {
			t = retry.DefaultTimeout
		}
		ctx, cancel := context.WithDeadline(ctx, now.Add(t))
		return ctx, cancel, nil
	default:
		return ctx, noCancel, nil
	}
}

func noCancel() {}

// shavedCtx advertises a deadline earlier than its parent's, without a
// timer of its own: gRPC sends Deadline() downstream as grpc-timeout and
// the server enforces it (answering DEADLINE_EXCEEDED), while locally the
// call ends at the latest when the parent's deadline fires, the margin
// later. This saves a timer per call on the hot path.
type shavedCtx struct {
	context.Context
	dl time.Time
}

func (c *shavedCtx) Deadline() (time.Time, bool) { return c.dl, true }

// outgoing returns ctx with the levee metadata of call at attempt n. The
// defaults (CRITICAL, attempt 0, no tenant) are not sent: a server reads
// missing metadata as the defaults.
func outgoing(ctx context.Context, call levee.Call, n int) context.Context {
	t := wire.FormatTenant(call.Tenant)
	if t == "" && n == 0 && (call.Criticality == levee.Critical || !call.Criticality.Valid()) {
		return ctx
	}
	if t != "" {
		return metadata.AppendToOutgoingContext(ctx,
			wire.MdCriticality, wire.FormatCriticality(call.Criticality),
			wire.MdAttempt, wire.FormatAttempt(n),
			wire.MdTenant, t)
	}
	return metadata.AppendToOutgoingContext(ctx,
		wire.MdCriticality, wire.FormatCriticality(call.Criticality),
		wire.MdAttempt, wire.FormatAttempt(n))
}

// attemptError is the error of one attempt that ended in a levee rejection:
// it unwraps to the rejection (found first by errors.As, so retry.Classify
// and the pushback read it) and to the gRPC status error.
type attemptError struct {
	rej *levee.RejectedError
	err error
}

func (e *attemptError) Error() string   { return e.err.Error() }
func (e *attemptError) Unwrap() []error { return []error{e.rej, e.err} }

// classify turns the error of one attempt (with its trailer) into what
// retry.Attempts understands: a levee rejection stays itself (marked
// retry.Unsent when it is a retryable overload); a plain
// Unavailable (connection lost, server going away) is marked retryable,
// which the Policy retries only for idempotent calls; anything else is
// permanent.
func classify(err error, trailer metadata.MD) error {
	if rej := Rejection(err, trailer); rej != nil {
		if levee.AsRejected(err) == rej {
			return err // already levee's (a local rejection)
		}
		var e error = &attemptError{rej: rej, err: err}
		if rej.Reason == levee.Overloaded && !rej.NoRetry {
			// Only a server's admission says "overloaded, retry later"
			// (a handler's overload goes upward as no-retry): the request
			// was never processed, so even a non-idempotent call may be
			// retried.
			e = retry.Unsent(e)
		}
		return e
	}
	if status.Code(err) == codes.Unavailable {
		return retry.Retryable(err)
	}
	return err
}

// notAccepted reports whether err says the backend refused the request for
// overload or quota: what adaptive throttling counts against it.
func notAccepted(err error) bool {
	if err == nil {
		return false
	}
	rej := levee.AsRejected(err)
	return rej != nil && (rej.Reason == levee.Overloaded || rej.Reason == levee.Quota)
}

// callError is the error the client interceptors return when a call failed
// with a levee rejection (the server's, after retries, or a local one). Its
// GRPCStatus is the mid-tier mapping (see Error), so a handler that returns
// it answers its own caller correctly; errors.As finds the
// *levee.RejectedError (for an overload after retries or an exhausted
// budget, "overloaded; no-retry" first, see retry.GiveUpError).
type callError struct {
	err error
	st  *status.Status
}

func (e *callError) Error() string              { return e.err.Error() }
func (e *callError) Unwrap() error              { return e.err }
func (e *callError) GRPCStatus() *status.Status { return e.st }

// result returns the error a call ends with.
func result(err error) error {
	if err == nil {
		return nil
	}
	rej := levee.AsRejected(err)
	if rej == nil {
		return err // status.FromError still finds the call's status in it
	}
	return &callError{err: err, st: Status(upward(rej))}
}

// begin reads what both interceptors need for one call: its levee.Call, the
// target's throttle (nil when throttling is off) and the retry state, set
// up in a.
func (c *Client) begin(ctx context.Context, cc *grpc.ClientConn, method string, now time.Time, a *retry.Attempts) (levee.Call, *throttle.Throttle) {
	dl, _ := ctx.Deadline()
	var thr *throttle.Throttle
	if c.throttle != nil {
		thr = c.throttle.Get(c.key(cc, method))
	}
	a.Init(c.policyFor(method), now, dl)
	return levee.CallFrom(ctx), thr
}

// UnaryClientInterceptor is a grpc.UnaryClientInterceptor (install it with
// grpc.WithChainUnaryInterceptor, or use DialOptions). For each call it
// bounds the deadline (the caller's minus the margin, or the policy's
// timeout), then for each attempt asks the target's throttle, sends the
// levee.Call of ctx as metadata (levee-criticality, levee-tenant,
// levee-attempt), and after a failure asks the retry.Policy whether and
// when to try again, honouring pushback, RetryInfo and "no-retry". It
// returns nil, the call's own error, or for a levee rejection an error whose
// gRPC status is the mid-tier mapping and which carries a
// *levee.RejectedError (levee.AsRejected): when the client gave up on a
// retryable overload (attempts, budget or deadline exhausted) that is
// "overloaded; no-retry", and the server's own rejection is in the
// *retry.GiveUpError's Err.
func (c *Client) UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	now := c.now()
	ctx, cancel, err := c.bound(ctx, now, true)
	if err != nil {
		return result(err)
	}
	defer cancel()
	var a retry.Attempts
	call, thr := c.begin(ctx, cc, method, now, &a)
	for {
		n := a.Attempt()
		if thr != nil {
			if terr := thr.AllowAt(now, call.Criticality); terr != nil {
				a.Next(now, terr)
				return result(a.Err())
			}
		}
		actx, acancel := ctx, context.CancelFunc(nil)
		if c.policy.AttemptTimeout > 0 {
			actx, acancel = context.WithTimeout(ctx, c.policy.AttemptTimeout)
		}
		err := invoker(outgoing(actx, call, n), method, req, reply, cc, opts...)
		ownTimeout := acancel != nil && ctx.Err() == nil && actx.Err() != nil
		if acancel != nil {
			acancel()
		}
		if err == nil {
			// Reported at the send time: the time only decides when the
			// throttle folds its counters, and a clock read is saved.
			if thr != nil {
				thr.DoneAt(now, call.Criticality, true)
			}
			return nil
		}
		now = c.now()
		if ownTimeout && status.Code(err) == codes.DeadlineExceeded {
			err = retry.Retryable(err)
		} else {
			// Every levee server puts the delay and "no-retry" in the
			// status details: no trailer needed (grpc.Trailer would cost a
			// copy of the trailer on every call).
			err = classify(err, nil)
		}
		if thr != nil && ctx.Err() == nil { // a call its caller gave up says nothing of the backend
			thr.DoneAt(now, call.Criticality, !notAccepted(err))
		}
		wait, again := a.Next(now, err)
		if !again {
			return result(a.Err())
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return result(err)
		}
		now = c.now()
	}
}

// StreamClientInterceptor is a grpc.StreamClientInterceptor (install it
// with grpc.WithChainStreamInterceptor, or use DialOptions). It throttles
// and propagates as UnaryClientInterceptor does, shaving the margin off the
// caller's deadline (a stream without a deadline gets none: streams may
// live long). It retries only the establishment of the stream (the
// streamer's own error); once messages flow, a rejection is returned from
// RecvMsg, never retried, as an error carrying the *levee.RejectedError and
// the mid-tier mapping as its gRPC status. The outcome (accepted, or
// overload/quota) is reported to the throttle at the first RecvMsg result.
func (c *Client) StreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	now := c.now()
	ctx, cancel, err := c.bound(ctx, now, false)
	if err != nil {
		return nil, result(err)
	}
	var a retry.Attempts
	call, thr := c.begin(ctx, cc, method, now, &a)
	for {
		n := a.Attempt()
		if thr != nil {
			if terr := thr.AllowAt(now, call.Criticality); terr != nil {
				cancel()
				a.Next(now, terr)
				return nil, result(a.Err())
			}
		}
		cs, err := streamer(outgoing(ctx, call, n), desc, cc, method, opts...)
		now = c.now()
		if err == nil {
			return &clientStream{ClientStream: cs, c: c, thr: thr, crit: call.Criticality, cancel: cancel}, nil
		}
		err = classify(err, nil)
		if thr != nil && ctx.Err() == nil {
			thr.DoneAt(now, call.Criticality, !notAccepted(err))
		}
		wait, again := a.Next(now, err)
		if !again {
			cancel()
			return nil, result(a.Err())
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			cancel()
			return nil, result(err)
		}
		now = c.now()
	}
}

// clientStream maps a stream's rejection and reports its outcome to the
// throttle once.
type clientStream struct {
	grpc.ClientStream
	c      *Client
	thr    *throttle.Throttle
	crit   levee.Criticality
	cancel context.CancelFunc
	judged atomic.Bool
}

func (s *clientStream) judge(err error) {
	if s.thr != nil && s.judged.CompareAndSwap(false, true) {
		s.thr.DoneAt(s.c.now(), s.crit, !notAccepted(err))
	}
}

// RecvMsg receives a message; at the end of the stream it releases the
// stream's deadline and, for a rejection, returns the mapped error.
func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		s.judge(nil)
		return nil
	}
	defer s.cancel()
	if errors.Is(err, io.EOF) {
		s.judge(nil)
		return err
	}
	cerr := classify(err, s.ClientStream.Trailer())
	s.judge(cerr)
	if levee.AsRejected(cerr) == nil {
		return err
	}
	return result(cerr)
}
