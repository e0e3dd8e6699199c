package levee

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Reason says why levee refused a request.
type Reason uint8

// The reasons for a rejection. The zero Reason is not a valid rejection.
const (
	// Overloaded: the server (or a dependency of it) is above its resource
	// target. HTTP 503, gRPC UNAVAILABLE.
	Overloaded Reason = iota + 1
	// Quota: the tenant is over its configured quota. HTTP 429, gRPC
	// RESOURCE_EXHAUSTED.
	Quota
	// Deadline: the request's deadline has passed or cannot be met. HTTP 504,
	// gRPC DEADLINE_EXCEEDED.
	Deadline
	// Throttled: the client refused the request locally (adaptive throttling
	// or an exhausted retry budget) without touching the network.
	Throttled
)

// NumReasons sizes arrays indexed by Reason: the four reasons and the
// unused index 0, so a [NumReasons]T is indexed by a Reason directly.
const NumReasons = int(Throttled) + 1

var reasonNames = [NumReasons]string{"", "overloaded", "quota", "deadline", "throttled"}

// String returns the lower-case wire name: "overloaded", "quota",
// "deadline", "throttled".
func (r Reason) String() string {
	if int(r) < len(reasonNames) && r != 0 {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}

// ParseReason parses a wire name as produced by String. It returns 0 and
// false for anything else.
func ParseReason(s string) (Reason, bool) {
	for i := 1; i < len(reasonNames); i++ {
		if s == reasonNames[i] {
			return Reason(i), true
		}
	}
	return 0, false
}

// RejectedError is the error every levee component returns for a request it
// refused. Test for it with errors.As, or for one reason with errors.Is
// against ErrOverloaded, ErrQuota, ErrDeadline or ErrThrottled.
//
// Values returned by levee are shared and must not be modified.
type RejectedError struct {
	// Reason says why the request was refused.
	Reason Reason
	// RetryAfter is how long the caller should wait before trying again;
	// 0 means no advice.
	RetryAfter time.Duration
	// NoRetry says that no layer should retry the request: the system is
	// overloaded and retries would only add load.
	NoRetry bool
}

// Error returns a lower-case message such as
// "levee: rejected: overloaded; no-retry" or
// "levee: rejected: quota; retry after 1.5s".
func (e *RejectedError) Error() string {
	s := "levee: rejected: " + e.Reason.String()
	if e.NoRetry {
		s += "; no-retry"
	} else if e.RetryAfter > 0 {
		s += "; retry after " + e.RetryAfter.String()
	}
	return s
}

// Is reports whether target is a *RejectedError with the same Reason, so
// that errors.Is(err, levee.ErrOverloaded) matches every overload rejection
// whatever its RetryAfter and NoRetry.
func (e *RejectedError) Is(target error) bool {
	t, ok := target.(*RejectedError)
	return ok && t.Reason == e.Reason
}

// Sentinels for errors.Is; each matches every RejectedError of its Reason.
var (
	ErrOverloaded error = &RejectedError{Reason: Overloaded}
	ErrQuota      error = &RejectedError{Reason: Quota}
	ErrDeadline   error = &RejectedError{Reason: Deadline}
	ErrThrottled  error = &RejectedError{Reason: Throttled}
)

// AsRejected returns the *RejectedError in err's chain, or nil. It does
// not allocate.
func AsRejected(err error) *RejectedError {
	if e, ok := err.(*RejectedError); ok || err == nil {
		return e
	}
	r, _ := errors.AsType[*RejectedError](err)
	return r
}

// errStageDeadline is shared: CheckStage must not allocate.
var errStageDeadline = &RejectedError{Reason: Deadline, NoRetry: true}

// CheckStage reports whether a stage of multi-stage work that needs about
// need to complete can still finish before ctx's deadline. It returns nil if
// ctx has no deadline or enough time is left, and a *RejectedError with
// Reason Deadline (NoRetry set: retrying cannot create time) if ctx is
// already done or less than need remains. A negative need counts as 0.
// Call it before each stage so that no stage starts work nobody will see.
func CheckStage(ctx context.Context, need time.Duration) error {
	return CheckStageAt(ctx, need, time.Now())
}

// CheckStageAt is CheckStage at the given time, for virtual time: the
// deadline is compared with now, not with the wall clock, and only an
// explicit cancellation of ctx counts by itself.
func CheckStageAt(ctx context.Context, need time.Duration, now time.Time) error {
	dl, ok := ctx.Deadline()
	if err := ctx.Err(); err != nil && (!ok || err == context.Canceled) {
		return errStageDeadline
	}
	if !ok {
		return nil
	}
	if need < 0 {
		need = 0
	}
	if dl.Sub(now) <= need {
		return errStageDeadline
	}
	return nil
}
