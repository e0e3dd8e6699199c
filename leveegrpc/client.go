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
	"github.com/levee-dev/levee/internal/outbound"
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

// WithMargin sets the most shaved off the caller's deadline before it is
// sent downstream (gRPC sends it as grpc-timeout), so that the answer,
// rejection included, arrives while the caller still waits; never more than
// a tenth of the time left. Default DefaultMargin; negative values count as
// 0. A call with less than a millisecond left after the margin fails at
// once with a Deadline rejection, without touching the network.
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

// DefaultMargin is the most a Client shaves off the time left before it is
// sent downstream, never more than a tenth of it: levee's one client
// margin, shared with leveehttp (see internal/outbound for why 10 ms).
const DefaultMargin = outbound.DefaultMargin

// NewClient returns a Client configured by opts.
func NewClient(opts ...ClientOption) *Client {
	c := &Client{
		throttle: throttle.NewGroup(),
		margin:   DefaultMargin,
		key:      func(cc *grpc.ClientConn, _ string) string { return cc.Target() },
		now:      time.Now,
		sleep:    outbound.Sleep,
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

// advertise returns the context attempt a is sent with: its own, or one
// whose Deadline is the time left minus the margin (see outbound.Left),
// which gRPC sends as grpc-timeout.
func (c *Client) advertise(a outbound.Attempt) context.Context {
	if a.Left <= 0 || c.margin == 0 {
		return a.Ctx
	}
	return &shavedCtx{Context: a.Ctx, dl: a.At.Add(a.Left)}
}

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

// judge says what the (classified) error of an attempt says about the
// backend's load (outbound.Judge, read through gRPC's codes): a
// DEADLINE_EXCEEDED without levee's details (the server ran out of the
// time it was given) is a timeout, which counts as overload; a plain
// UNAVAILABLE (connection refused or lost, server stopping) reached no
// working backend; CANCELLED is the caller's; any other code is an
// answer.
func judge(err error) outbound.Outcome {
	if rej := levee.AsRejected(err); rej != nil && rej != deadlineRejection {
		return outbound.Judge(err)
	}
	st, ok := status.FromError(err)
	if !ok {
		return outbound.Judge(err)
	}
	switch st.Code() {
	case codes.DeadlineExceeded:
		if leveeDetails(st) {
			return outbound.Answered // levee's "deadline cannot be met"
		}
		return outbound.Overload
	case codes.Unavailable, codes.Canceled:
		return outbound.Unreached
	}
	return outbound.Answered
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

// call returns the attempt loop (internal/outbound) of one call of method
// on cc, with ctx's criticality.
func (c *Client) call(cc *grpc.ClientConn, method string, crit levee.Criticality) outbound.Call {
	oc := outbound.Call{
		Policy:      c.policyFor(method),
		Criticality: crit,
		Margin:      c.margin,
		Now:         c.now,
		Sleep:       c.sleep,
		Classify:    classifyAttempt,
		Judge:       judge,
	}
	if c.throttle != nil {
		oc.Throttle = c.throttle.Get(c.key(cc, method))
	}
	return oc
}

// classifyAttempt is classify without a trailer: every levee server puts
// the delay and "no-retry" in the status details (grpc.Trailer would cost
// a copy of the trailer on every call).
func classifyAttempt(err error) error { return classify(err, nil) }

// UnaryClientInterceptor is a grpc.UnaryClientInterceptor (install it with
// grpc.WithChainUnaryInterceptor, or use DialOptions). For each call it
// bounds the deadline (the policy's timeout when the caller set none), then
// for each attempt asks the target's throttle, sends the levee.Call of ctx
// as metadata (levee-criticality, levee-tenant, levee-attempt) and the time
// left minus the margin as the deadline, and after a failure asks the
// retry.Policy whether and when to try again, honouring pushback,
// RetryInfo and "no-retry". It returns nil, the call's own error, or for a
// levee rejection an error whose gRPC status is the mid-tier mapping and
// which carries a *levee.RejectedError (levee.AsRejected): when the client
// gave up on a retryable overload (attempts, budget or deadline exhausted)
// that is "overloaded; no-retry", and the server's own rejection is in the
// *retry.GiveUpError's Err.
func (c *Client) UnaryClientInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	ctx, cancel := outbound.Bound(ctx, c.now(), c.policy)
	if cancel != nil {
		defer cancel()
	}
	call := levee.CallFrom(ctx)
	oc := c.call(cc, method, call.Criticality)
	return result(oc.Run(ctx, func(a outbound.Attempt) error {
		err := invoker(outgoing(c.advertise(a), call, a.N), method, req, reply, cc, opts...)
		if err == nil {
			a.Release()
		}
		return err
	}))
}

// StreamClientInterceptor is a grpc.StreamClientInterceptor (install it
// with grpc.WithChainStreamInterceptor, or use DialOptions). It throttles
// and propagates as UnaryClientInterceptor does, shaving the margin off the
// caller's deadline (a stream without a deadline gets none, and no
// per-attempt timeout: streams may live long). It retries only the
// establishment of the stream (the streamer's own error); once messages
// flow, a rejection is returned from RecvMsg, never retried, as an error
// carrying the *levee.RejectedError and the mid-tier mapping as its gRPC
// status. The outcome is reported to the throttle at the first RecvMsg
// result.
func (c *Client) StreamClientInterceptor(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	call := levee.CallFrom(ctx)
	oc := c.call(cc, method, call.Criticality)
	oc.Policy.AttemptTimeout = 0
	oc.Deferred = true
	var cs grpc.ClientStream
	err := oc.Run(ctx, func(a outbound.Attempt) error {
		s, err := streamer(outgoing(c.advertise(a), call, a.N), desc, cc, method, opts...)
		cs = s
		return err
	})
	if err != nil {
		return nil, result(err)
	}
	return &clientStream{ClientStream: cs, c: c, thr: oc.Throttle, crit: call.Criticality}, nil
}

// clientStream maps a stream's rejection and reports its outcome to the
// throttle once.
type clientStream struct {
	grpc.ClientStream
	c      *Client
	thr    *throttle.Throttle
	crit   levee.Criticality
	judged atomic.Bool
}

func (s *clientStream) judge(err error) {
	if s.thr == nil || !s.judged.CompareAndSwap(false, true) {
		return
	}
	o := outbound.Answered
	if err != nil {
		o = judge(err)
	}
	o.Report(s.thr, s.c.now(), s.crit)
}

// RecvMsg receives a message; at the end of the stream, for a rejection,
// it returns the mapped error.
func (s *clientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil || errors.Is(err, io.EOF) {
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
