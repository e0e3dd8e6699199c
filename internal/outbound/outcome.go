package outbound

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/throttle"
)

// Outcome is what a failed attempt says about the backend's load, the
// input of its adaptive throttle.
type Outcome uint8

const (
	// Answered: the backend answered (an application error, a deadline
	// it could not meet): it was able to work. Counts as accepted.
	Answered Outcome = iota
	// Overload: the backend rejected the request for overload or quota,
	// or gave no answer in time, which is how a backend without levee
	// shows overload. Counts as not accepted.
	Overload
	// Unreached: the request never reached a working backend (connection
	// refused, DNS failure, connection reset) or the caller abandoned it.
	// It says nothing about load and counts for nothing: a restarting or
	// crashing backend must not teach the client to throttle itself into
	// a long tail after it is back.
	Unreached
)

// String returns "answered", "overload" or "unreached".
func (o Outcome) String() string {
	switch o {
	case Answered:
		return "answered"
	case Overload:
		return "overload"
	}
	return "unreached"
}

// Report tells t (nil: nothing) the outcome o of a request of criticality
// c that t let through: Answered counts as accepted, Overload as not,
// Unreached not at all.
func (o Outcome) Report(t *throttle.Throttle, now time.Time, c levee.Criticality) {
	switch o {
	case Answered:
		t.DoneAt(now, c, true)
	case Overload:
		t.DoneAt(now, c, false)
	}
}

// Judge classifies the error of a failed attempt by what it says about the
// backend's load:
//
//   - a levee rejection for overload or quota from the backend: Overload;
//     any other levee rejection from it (deadline): Answered; a local
//     Throttled rejection: Unreached (it never left);
//   - a timeout (context.DeadlineExceeded, os.ErrDeadlineExceeded, a
//     net.Error whose Timeout is true): Overload;
//   - context.Canceled, connection refused or reset, a DNS error, an
//     error marked retry.Unsent, and every other transport error:
//     Unreached.
//
// Protocols whose errors carry answers (gRPC status codes) judge those
// first and pass the rest here.
func Judge(err error) Outcome {
	if rej := levee.AsRejected(err); rej != nil {
		switch rej.Reason {
		case levee.Overloaded, levee.Quota:
			return Overload
		case levee.Throttled:
			return Unreached
		}
		return Answered
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return Overload
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) {
		return Unreached
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return Unreached
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return Overload
	}
	return Unreached
}
