package outbound

import (
	"context"
	"errors"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// DefaultMargin is the most a client shaves off the time left before
// sending it downstream as the callee's budget (Levee-Timeout-Ms,
// grpc-timeout). The callee's answer, a rejection included, must still
// travel back and be read while the caller waits: a return trip inside a
// region (well under 2 ms) plus the scheduling delay of a busy client (a
// few ms when its cores are saturated). It never takes more than a tenth
// of the time left, so short budgets keep most of their time.
const DefaultMargin = 10 * time.Millisecond

// Left returns the time budget an attempt made at now that must end by
// deadline advertises downstream: the time left minus margin, the margin
// capped at a tenth of the time left. ok is false when less than a
// millisecond would remain: the call cannot succeed and is refused locally.
// Negative margins count as 0.
func Left(now, deadline time.Time, margin time.Duration) (left time.Duration, ok bool) {
	left = deadline.Sub(now)
	left -= min(max(margin, 0), max(left/10, 0))
	return left, left >= time.Millisecond
}

// ErrLocalDeadline is returned, without sending, when the call's time left
// (after the margin) is under a millisecond or its deadline has passed.
// Never modified.
var ErrLocalDeadline error = &levee.RejectedError{Reason: levee.Deadline, NoRetry: true}

// Call is one outgoing call's settings. Fill it per call (it is small and
// lives on the stack) and Run it once.
type Call struct {
	// Policy says how many attempts, which backoff, which budget and which
	// per-attempt timeout. Set NotIdempotent for calls that must not run
	// twice.
	Policy retry.Policy
	// Throttle is the backend's adaptive throttle; nil throttles nothing.
	Throttle *throttle.Throttle
	// Criticality is the call's, for the throttle.
	Criticality levee.Criticality
	// Margin is shaved off the time left before it is advertised (see
	// Left); DefaultMargin is the adapters' default.
	Margin time.Duration
	// Deadline, when set, bounds the call's attempts, retries and
	// advertised budget like a deadline of ctx, without being one: a
	// transport uses it for its default timeout when the response body
	// must outlive it (see Bound).
	Deadline time.Time
	// Now reads the clock; nil means time.Now.
	Now func() time.Time
	// Sleep waits d unless ctx ends first; nil means Sleep.
	Sleep func(ctx context.Context, d time.Duration) error
	// Classify turns the error of a failed attempt into what
	// retry.Attempts and Judge read: a levee rejection as a
	// *levee.RejectedError in the chain, and retry.Unsent or
	// retry.Retryable marks where the protocol knows them. It sees every
	// error but that of an attempt that ran out of its own time (retried
	// as such). nil leaves errors as they are.
	Classify func(err error) error
	// Judge says what a failed attempt's (classified) error says about
	// the backend's load; nil means Judge. Protocols with their own error
	// codes wrap it.
	Judge func(err error) Outcome
	// OneShot ends the call at its first failure: its request cannot be
	// sent again (a body that cannot be replayed).
	OneShot bool
	// Deferred leaves the report of a successful attempt to the sender,
	// which learns later whether the backend accepted it (a stream's first
	// message).
	Deferred bool
}

// Attempt is one attempt, handed to the protocol's send function.
type Attempt struct {
	// N is the attempt number: 0 for the first, 1 and 2 for retries.
	N int
	// Ctx is the call's context, or a child bounded by the attempt's own
	// deadline (Policy.AttemptTimeout).
	Ctx context.Context
	// At is when the attempt started, on the Call's clock.
	At time.Time
	// Left is the time budget to advertise downstream (see Left); 0 when
	// the call has no deadline.
	Left time.Duration
	// Release releases Ctx's timer. Run calls it after a failed attempt;
	// after a successful one the sender owns it and calls it once the
	// response is finished with (its body read or closed).
	Release context.CancelFunc
}

func noRelease() {}

// Run makes the call: attempts through send, each after a throttle check,
// retried as the Policy allows. send returns nil when the attempt
// succeeded (the response goes to the caller), or the attempt's error:
// a *levee.RejectedError for a levee rejection read from the response,
// the transport's error otherwise, marked with retry.Unsent when it proves
// that nothing was sent. Run returns nil, a local rejection
// (ErrLocalDeadline, throttle.ErrThrottled), the last error when it is not
// retryable (retry.Classify), the last error itself for a OneShot call, or
// a *retry.GiveUpError when a retryable failure was not retried any further
// (attempts, budget or deadline exhausted, or ctx ended during the wait).
func (c *Call) Run(ctx context.Context, send func(Attempt) error) error {
	now := c.now()
	dl, _ := ctx.Deadline()
	if !c.Deadline.IsZero() && (dl.IsZero() || c.Deadline.Before(dl)) {
		dl = c.Deadline
	}
	var a retry.Attempts
	a.Init(c.Policy, now, dl)
	// A retry asks the throttle before the retry budget (retry.Attempts'
	// gate): a retry the throttle refuses spends no budget token.
	var gate func(time.Time) error
	if c.Throttle != nil {
		gate = func(now time.Time) error { return c.Throttle.AllowAt(now, c.Criticality) }
	}
	allowed := false // the gate already let this attempt through
	for {
		at, err := c.attempt(ctx, now, a.Attempt(), dl)
		if err != nil {
			return err
		}
		if !allowed {
			if err := c.Throttle.AllowAt(now, c.Criticality); err != nil {
				at.Release()
				a.Next(now, err)
				return a.Err()
			}
		}
		err = send(at)
		if err == nil {
			if !c.Deferred {
				c.Throttle.DoneAt(now, c.Criticality, true)
			}
			return nil
		}
		own := at.Ctx != ctx && ctx.Err() == nil && at.Ctx.Err() != nil
		at.Release()
		now = c.now()
		switch {
		case own:
			// Only this attempt ran out of time: another may succeed. Not
			// classified: gRPC's DEADLINE_EXCEEDED would read as a
			// deadline rejection, which is never retried.
			err = retry.Retryable(err)
		case c.Classify != nil:
			err = c.Classify(err)
		}
		c.report(ctx, now, err, own)
		if c.OneShot {
			return err
		}
		wait, again := a.NextGated(now, err, gate)
		if !again {
			return a.Err()
		}
		allowed = true
		if c.sleep(ctx, wait) != nil {
			return &retry.GiveUpError{Err: err, Attempts: a.Attempt(), Stop: retry.StopDeadline}
		}
		now = c.now()
	}
}

// attempt prepares attempt n at now for a call that must end by dl (zero:
// no deadline): its context, deadline and advertised budget, or a local
// Deadline rejection when no useful time is left.
func (c *Call) attempt(ctx context.Context, now time.Time, n int, dl time.Time) (Attempt, error) {
	at := Attempt{N: n, Ctx: ctx, At: now, Release: noRelease}
	if err := cause(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return at, ErrLocalDeadline
		}
		return at, err
	}
	ok := !dl.IsZero()
	if d := c.Policy.AttemptTimeout; d > 0 && (!ok || now.Add(d).Before(dl)) {
		dl, ok = now.Add(d), true
		at.Ctx, at.Release = context.WithDeadline(ctx, dl)
	}
	if !ok {
		return at, nil
	}
	left, fits := Left(now, dl, c.Margin)
	if !fits {
		at.Release()
		return at, ErrLocalDeadline
	}
	at.Left = left
	return at, nil
}

// report tells the throttle what a failed attempt says about the backend.
func (c *Call) report(ctx context.Context, now time.Time, err error, own bool) {
	if c.Throttle == nil {
		return
	}
	o := Overload
	switch cerr := cause(ctx); {
	case own || errors.Is(cerr, context.DeadlineExceeded):
		// No answer in time: how a backend without levee shows overload.
	case cerr != nil:
		return // the caller gave up: nothing learned about the backend
	default:
		o = c.judge(err)
	}
	o.Report(c.Throttle, now, c.Criticality)
}

// cause is ctx's error, or the cause it was cancelled with: a transport
// that bounds only the wait for a response (not its body) cancels with
// context.DeadlineExceeded as the cause.
func cause(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

func (c *Call) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Call) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	return Sleep(ctx, d)
}

func (c *Call) judge(err error) Outcome {
	if c.Judge != nil {
		return c.Judge(err)
	}
	return Judge(err)
}

// Sleep waits d, or returns ctx's error as soon as ctx ends. d ≤ 0 returns
// at once. The request ctx belongs to, if a levee server's, is paused
// meanwhile (levee.Pauser): a wait between attempts is neither a queue in
// that server nor its service time.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	if p := levee.PauserFrom(ctx); p != nil {
		p.Pause()
		defer p.Unpause()
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

// Bound returns ctx bounded by now + the Policy's Timeout
// (retry.DefaultTimeout when 0) when ctx has no deadline, with the
// function releasing it; otherwise ctx and a nil function. A small, finite
// timeout is itself protection: nobody waits forever on an overloaded
// backend.
func Bound(ctx context.Context, now time.Time, p retry.Policy) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, nil
	}
	d := p.Timeout
	if d <= 0 {
		d = retry.DefaultTimeout
	}
	return context.WithDeadline(ctx, now.Add(d))
}
