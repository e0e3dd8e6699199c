package retry

import (
	"context"
	"errors"
	"time"

	"github.com/levee-dev/levee"
)

// Attempts steps one call through its attempts on explicit time: the form
// the simulator (virtual time) and transports use. Begin (or Init) counts
// the request in the budget; after each failed attempt Next classifies the
// error and says whether and after how long to retry. An Attempts is used by
// one goroutine at a time.
type Attempts struct {
	p        Policy
	budget   *Budget
	deadline time.Time
	made     int
	prev     time.Duration
	err      error
	stop     Stop
}

// Begin starts a call at now that must finish by deadline (zero: now plus
// Timeout, or DefaultTimeout) and counts it in the budget.
func (p Policy) Begin(now, deadline time.Time) *Attempts {
	a := new(Attempts)
	a.Init(p, now, deadline)
	return a
}

// Init is Begin into an existing value, without allocation.
func (a *Attempts) Init(p Policy, now, deadline time.Time) {
	if deadline.IsZero() {
		deadline = now.Add(p.timeout())
	}
	*a = Attempts{p: p, budget: p.budget(), deadline: deadline}
	a.budget.RequestAt(now)
}

// Attempt returns the number of the attempt to make now: 0 for the first,
// 1 and 2 for retries. Transports send it as Levee-Attempt.
func (a *Attempts) Attempt() int { return a.made }

// Deadline returns the call's deadline.
func (a *Attempts) Deadline() time.Time { return a.deadline }

// Next records that the attempt just made ended with err at now and
// returns whether to retry and how long to wait first. err nil ends the call
// successfully. A retry is granted only if all hold, checked in this order:
// Classify(err) is Transient (idempotent calls only) or NotSent; fewer than
// MaxAttempts attempts were made; the wait — max(Backoff, pushback·(1+u/2))
// with u the same uniform draw, so that servers' Retry-After is honoured and
// simultaneous pushbacks still spread — ends before the deadline; and the
// budget grants a token. Otherwise Err says why not.
func (a *Attempts) Next(now time.Time, err error) (wait time.Duration, retry bool) {
	return a.NextGated(now, err, nil)
}

// NextGated is Next with a gate asked after every other check and just
// before the budget: a retry the gate refuses (it returns an error, such as
// a local adaptive throttle's) ends the call with that error as Err and
// spends no budget token. A nil gate is Next. Transports pass their
// throttle here, so that a retry the throttle would refuse never costs the
// process's retry budget.
func (a *Attempts) NextGated(now time.Time, err error, gate func(now time.Time) error) (wait time.Duration, retry bool) {
	a.made++
	a.err = err
	if err == nil {
		return 0, false
	}
	switch Classify(err) {
	case Permanent:
		a.stop = StopPermanent
		return 0, false
	case Transient:
		if a.p.NotIdempotent {
			a.stop = StopPermanent
			return 0, false
		}
	}
	if a.made >= a.p.maxAttempts() {
		a.stop = StopAttempts
		return 0, false
	}
	u := a.p.uniform()
	wait = a.p.Backoff(a.made, a.prev, u)
	if pb := pushback(err); pb > 0 {
		wait = max(wait, pb+time.Duration(u*float64(pb)/2))
	}
	if !now.Add(wait).Before(a.deadline) {
		a.stop = StopDeadline
		return 0, false
	}
	if gate != nil {
		if gerr := gate(now); gerr != nil {
			a.err, a.stop = gerr, StopPermanent
			return 0, false
		}
	}
	if !a.budget.TryRetryAt(now) {
		a.stop = StopBudget
		return 0, false
	}
	a.prev = wait
	return wait, true
}

// Err returns the call's outcome after Next said not to retry: nil on
// success, the last error itself when it was not retryable, otherwise a
// *GiveUpError wrapping it (which, for overloads and budget refusals, says
// "overloaded; no-retry" to errors.As).
func (a *Attempts) Err() error {
	if a.err == nil || a.stop == StopPermanent {
		return a.err
	}
	return &GiveUpError{Err: a.err, Attempts: a.made, Stop: a.stop}
}

// Do calls fn until it succeeds or the Policy says stop, waiting between
// attempts, and returns nil or the error as Attempts.Err describes it. fn
// receives a context carrying levee.Call.Attempt (and, with AttemptTimeout,
// a per-attempt deadline) and the attempt number for Levee-Attempt. When ctx
// has no deadline the call is bounded by Timeout (DefaultTimeout). Do
// returns early, with the last error, when ctx is done during a wait.
func Do(ctx context.Context, p Policy, fn func(ctx context.Context, attempt int) error) error {
	now := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.timeout())
		defer cancel()
	}
	dl, _ := ctx.Deadline()
	var a Attempts
	a.Init(p, now, dl)
	call := levee.CallFrom(ctx)
	var timer *time.Timer
	for {
		n := a.Attempt()
		call.Attempt = n
		actx := levee.WithCall(ctx, call)
		cancel := context.CancelFunc(func() {})
		if p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeout(actx, p.AttemptTimeout)
		}
		err := fn(actx, n)
		ownTimeout := p.AttemptTimeout > 0 && ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
		cancel()
		if err == nil {
			return nil
		}
		if ownTimeout && errors.Is(err, context.DeadlineExceeded) {
			err = Retryable(err)
		}
		wait, retry := a.Next(time.Now(), err)
		if !retry {
			return a.Err()
		}
		if timer == nil {
			timer = time.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		if !sleep(ctx, timer) {
			return err
		}
	}
}

// sleep waits for timer, with the request of ctx paused meanwhile when it
// is a levee server's (levee.Pauser): the wait is neither a queue in that
// server nor its service time. It reports false when ctx ended first.
func sleep(ctx context.Context, timer *time.Timer) bool {
	if p := levee.PauserFrom(ctx); p != nil {
		p.Pause()
		defer p.Unpause()
	}
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
