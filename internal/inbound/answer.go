package inbound

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/levee-dev/levee"
)

// DefaultRetryAfter is the retry advice a server sends with an overload or
// quota rejection whose controller gave none: long enough that a rejected
// caller does not come straight back into the same overload, short enough
// that it is back soon after an overload episode (typically seconds) ends.
const DefaultRetryAfter = time.Second

// Delay returns the retry delay a server advertises for advice d
// (DefaultRetryAfter when d ≤ 0), spread uniformly over [0.75·d, 1.25·d)
// by u in [0, 1), so that callers rejected together do not come back
// together.
func Delay(d time.Duration, u float64) time.Duration {
	if d <= 0 {
		d = DefaultRetryAfter
	}
	u = min(max(u, 0), 1)
	return time.Duration(float64(d) * (0.75 + 0.5*u))
}

// Uniform returns a float64 in [0, 1) from src, math/rand/v2's runtime
// source when src is nil.
func Uniform(src func() uint64) float64 {
	var x uint64
	if src != nil {
		x = src()
	} else {
		x = rand.Uint64()
	}
	return float64(x>>11) / (1 << 53)
}

// Wire returns the reason and the no-retry flag that rej travels with: a
// Throttled (local) rejection, and any reason levee does not know, go out
// as "overloaded; no-retry", since the caller of a throttled client must
// not retry either.
func Wire(rej *levee.RejectedError) (levee.Reason, bool) {
	if rej.Reason == levee.Throttled || rej.Reason == 0 || rej.Reason > levee.Throttled {
		return levee.Overloaded, true
	}
	return rej.Reason, rej.NoRetry
}

// MidTier maps the error of a downstream call to the rejection this server
// answers its own caller with, or nil when err is not an overload, quota
// or deadline failure. Only the layer directly above the rejecting one
// retries:
//
//   - an overload (after this layer's retries, or marked no-retry), an
//     exhausted retry budget, a local throttle: Overloaded with NoRetry,
//     keeping the downstream's delay;
//   - a quota rejection: passed through with its delay (a tenant's quota
//     is the same at every tier);
//   - a deadline rejection, context.DeadlineExceeded or context.Canceled:
//     Deadline with NoRetry.
func MidTier(err error) *levee.RejectedError {
	if err == nil {
		return nil
	}
	rej, ok := err.(*levee.RejectedError)
	if !ok {
		rej = levee.AsRejected(err)
	}
	if rej == nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return DeadlineNoRetry
		}
		return nil
	}
	switch rej.Reason {
	case levee.Quota:
		return rej
	case levee.Deadline:
		return DeadlineNoRetry
	}
	if rej.RetryAfter <= 0 {
		return OverloadedNoRetry
	}
	return &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: rej.RetryAfter, NoRetry: true}
}
