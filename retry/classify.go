package retry

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
)

// Class is what Classify makes of an error.
type Class uint8

const (
	// Permanent errors are never retried: application errors, NoRetry and
	// Deadline and Throttled rejections, quota rejections without a delay,
	// context cancellation and expiry.
	Permanent Class = iota
	// Transient errors may succeed on another attempt of an idempotent
	// call: Overloaded rejections without NoRetry, quota rejections that
	// carry a delay, errors wrapped with Retryable.
	Transient
	// NotSent errors prove the request never reached the server (connection
	// refused, errors wrapped with Unsent): retrying is safe even for a call
	// that is not idempotent.
	NotSent
)

// String returns "permanent", "transient" or "unsent".
func (c Class) String() string {
	switch c {
	case Permanent:
		return "permanent"
	case Transient:
		return "transient"
	case NotSent:
		return "unsent"
	}
	return "Class(" + strconv.Itoa(int(c)) + ")"
}

type markedError struct {
	err   error
	class Class
}

func (e *markedError) Error() string { return e.err.Error() }
func (e *markedError) Unwrap() error { return e.err }

// Retryable returns err marked Transient: worth another attempt of an
// idempotent call. It returns nil for nil. The result unwraps to err.
func Retryable(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: Transient}
}

// Unsent returns err marked as proof that the request never left the client
// (transports use it for dial errors and resets before the request was
// written): retried even when the call is not idempotent. It returns nil for
// nil. The result unwraps to err.
func Unsent(err error) error {
	if err == nil {
		return nil
	}
	return &markedError{err: err, class: NotSent}
}

// Classify says whether err can succeed on retry. The first rule that
// matches wins:
//
//  1. nil: Permanent.
//  2. A *levee.RejectedError in the chain with NoRetry, or Reason Deadline
//     or Throttled: Permanent, whatever marks surround it (retrying cannot
//     create time, and a rejection that says no-retry or a local throttle
//     must never turn into more load).
//  3. A mark from Unsent or Retryable (the outermost wins): NotSent or
//     Transient.
//  4. context.Canceled, context.DeadlineExceeded: Permanent (the caller is
//     gone or out of time; Do marks its own per-attempt timeouts).
//  5. Any other *levee.RejectedError: Overloaded → Transient; Quota →
//     Transient only with a RetryAfter (and Next never waits less), else
//     Permanent.
//  6. syscall.ECONNREFUSED: NotSent (nothing was sent).
//  7. Anything else: Permanent. Retrying unknown errors is how retry
//     storms start; mark what you know to be transient.
func Classify(err error) Class {
	if err == nil {
		return Permanent
	}
	r := levee.AsRejected(err)
	if r != nil && (r.NoRetry || r.Reason == levee.Deadline || r.Reason == levee.Throttled) {
		return Permanent
	}
	if m, ok := errors.AsType[*markedError](err); ok {
		return m.class
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Permanent
	}
	if r != nil {
		switch {
		case r.Reason == levee.Overloaded, r.Reason == levee.Quota && r.RetryAfter > 0:
			return Transient
		}
		return Permanent
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return NotSent
	}
	return Permanent
}

// pushback returns the server's requested delay carried by err, 0 if none.
func pushback(err error) time.Duration {
	if r := levee.AsRejected(err); r != nil && r.RetryAfter > 0 {
		return r.RetryAfter
	}
	return 0
}

// Stop says why a call stopped retrying.
type Stop uint8

const (
	// StopPermanent: the last error is not retryable (see Classify).
	StopPermanent Stop = iota
	// StopAttempts: MaxAttempts attempts were made.
	StopAttempts
	// StopBudget: the retry budget had no token left.
	StopBudget
	// StopDeadline: the next wait would pass the deadline.
	StopDeadline
)

// String returns "permanent", "attempts", "budget" or "deadline".
func (s Stop) String() string {
	switch s {
	case StopPermanent:
		return "permanent"
	case StopAttempts:
		return "attempts"
	case StopBudget:
		return "budget"
	case StopDeadline:
		return "deadline"
	}
	return "Stop(" + strconv.Itoa(int(s)) + ")"
}

// ErrBudgetExhausted matches (errors.Is) every error returned because the
// retry budget refused a retry.
var ErrBudgetExhausted = errors.New("retry: budget exhausted")

// errNoRetry is what a layer that gave up on an overloaded dependency says
// upward: shared, never modified.
var errNoRetry = &levee.RejectedError{Reason: levee.Overloaded, NoRetry: true}

// GiveUpError is returned by Do and Attempts.Err when a retryable failure
// was not retried any further (attempts, budget or deadline exhausted). It
// unwraps to the last attempt's error and, when the failure was an overload
// or the budget ran out, to a *levee.RejectedError{Reason: Overloaded,
// NoRetry: true} found first by errors.As: a mid-tier that maps it upward
// answers "overloaded; no-retry", so only the layer directly above the
// rejecting one retries. A budget refusal also matches ErrBudgetExhausted.
// Quota rejections keep their own reason and delay.
type GiveUpError struct {
	// Err is the last attempt's error.
	Err error
	// Attempts is the number of attempts made.
	Attempts int
	// Stop says why retrying stopped.
	Stop Stop
}

// Error returns e.g. "retry: gave up after 3 attempts (attempts): levee: rejected: overloaded".
func (e *GiveUpError) Error() string {
	return "retry: gave up after " + strconv.Itoa(e.Attempts) + " attempts (" + e.Stop.String() + "): " + e.Err.Error()
}

// Unwrap returns, in this order, ErrBudgetExhausted (budget stops), the
// shared Overloaded+NoRetry rejection (overload or budget stops) and Err.
func (e *GiveUpError) Unwrap() []error {
	out := make([]error, 0, 3)
	if e.Stop == StopBudget {
		out = append(out, ErrBudgetExhausted)
	}
	if e.noRetry() {
		out = append(out, errNoRetry)
	}
	return append(out, e.Err)
}

func (e *GiveUpError) noRetry() bool {
	if e.Stop == StopBudget {
		return true
	}
	r := levee.AsRejected(e.Err)
	return r != nil && r.Reason == levee.Overloaded
}
