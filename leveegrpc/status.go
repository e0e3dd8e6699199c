package leveegrpc

import (
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/inbound"
	"github.com/levee-dev/levee/internal/wire"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the status details
// levee attaches to its rejections.
const ErrorDomain = "levee.dev"

// Keys of the ErrorInfo metadata levee attaches to its rejections. The
// values use the HTTP headers' formats (see internal/wire): the
// Levee-Reject value ("overloaded", "overloaded; no-retry", "quota", ...) and
// the delay in whole milliseconds.
const (
	InfoReject       = "reject"
	InfoRetryAfterMs = "retry-after-ms"
)

// Code returns the gRPC status code of a levee rejection with reason r:
// Overloaded and Throttled → Unavailable, Quota → ResourceExhausted,
// Deadline → DeadlineExceeded. An invalid r gives Unavailable.
func Code(r levee.Reason) codes.Code {
	switch r {
	case levee.Quota:
		return codes.ResourceExhausted
	case levee.Deadline:
		return codes.DeadlineExceeded
	default:
		return codes.Unavailable
	}
}

// Status returns the gRPC status that tells a client about rej: the code of
// Code(rej.Reason), rej's message, and the details levee clients read: a
// google.rpc.ErrorInfo (domain ErrorDomain, reason "OVERLOADED", "QUOTA"
// or "DEADLINE", metadata InfoReject and InfoRetryAfterMs) and,
// when the client may retry after a delay, a google.rpc.RetryInfo with that
// delay. A Throttled rejection is sent as "overloaded; no-retry" (the caller
// of a throttled client must not retry either). A nil rej gives an
// Unavailable status without details. The delay is rounded up to a whole
// millisecond, the unit of the wire's retry-after-ms, so that the statuses
// of a flood's refusals are built once and shared (they are immutable;
// delays up to about 2 s).
//
// Status is what the tap returns, since a tap cannot send trailers;
// interceptors send the same status plus the grpc-retry-pushback-ms trailer
// returned by Pushback.
func Status(rej *levee.RejectedError) *status.Status {
	if rej == nil {
		return status.New(codes.Unavailable, "leveegrpc: rejected")
	}
	return answer(rej).st
}

// rejection is a rejection's status and its error, built once (answer).
type rejection struct {
	st  *status.Status
	err error
}

// cachedDelayMs is the longest delay, in whole milliseconds, whose
// rejections answer caches: levee's default delay is 1 s, spread by
// ±25 % (internal/inbound).
const cachedDelayMs = 2047

// rejections caches the statuses of the rejections a server sends again
// and again: one per original reason (Overloaded … Throttled), no-retry
// flag and whole millisecond of delay, built at first use; a row of
// delays is allocated when its reason and flag are first sent. A status is
// immutable, so one serves every call; building one costs about thirty
// allocations and a few microseconds (BenchmarkRejection), which a server
// refusing a flood would pay once per refusal.
var rejections [levee.Throttled][2]atomic.Pointer[[cachedDelayMs + 1]atomic.Pointer[rejection]]

// answer returns rej's status and error, rej's delay rounded up to a whole
// millisecond (the unit of the wire's retry-after-ms; a no-retry rejection
// carries none): from the cache when the delay is at most cachedDelayMs,
// built otherwise. rej must not be nil.
func answer(rej *levee.RejectedError) *rejection {
	ms := int64(0)
	if rej.RetryAfter > 0 && !rej.NoRetry {
		ms = int64((rej.RetryAfter + time.Millisecond - 1) / time.Millisecond)
	}
	r := levee.RejectedError{Reason: rej.Reason, NoRetry: rej.NoRetry, RetryAfter: time.Duration(ms) * time.Millisecond}
	if r.Reason < levee.Overloaded || r.Reason > levee.Throttled || ms > cachedDelayMs {
		return build(&r)
	}
	nr := 0
	if r.NoRetry {
		nr = 1
	}
	row := &rejections[r.Reason-1][nr]
	delays := row.Load()
	if delays == nil {
		row.CompareAndSwap(nil, new([cachedDelayMs + 1]atomic.Pointer[rejection]))
		delays = row.Load()
	}
	slot := &delays[ms]
	if a := slot.Load(); a != nil {
		return a
	}
	a := build(&r)
	slot.Store(a) // a race stores an equal status: either serves
	return a
}

// build builds rej's status and error (see Status).
func build(rej *levee.RejectedError) *rejection {
	reason, noRetry := inbound.Wire(rej)
	st := status.New(Code(reason), rej.Error())
	info := &errdetails.ErrorInfo{
		Reason: upperReason[reason],
		Domain: ErrorDomain,
		Metadata: map[string]string{
			InfoReject: wire.FormatReject(reason, noRetry),
		},
	}
	var err error
	if rej.RetryAfter > 0 && !noRetry {
		info.Metadata[InfoRetryAfterMs] = wire.FormatRetryAfterMs(rej.RetryAfter)
		st, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(rej.RetryAfter)})
	} else {
		st, err = st.WithDetails(info)
	}
	if err != nil { // unreachable: the code is never OK and the details marshal
		st = status.New(Code(reason), rej.Error())
	}
	return &rejection{st: st, err: st.Err()}
}

// rejectErr is Status(rej).Err(), without building either again for a
// rejection answered before.
func rejectErr(rej *levee.RejectedError) error {
	if rej == nil {
		return Status(nil).Err()
	}
	return answer(rej).err
}

var upperReason = [...]string{
	levee.Overloaded: "OVERLOADED",
	levee.Quota:      "QUOTA",
	levee.Deadline:   "DEADLINE",
}

// Pushback returns the grpc-retry-pushback-ms trailer for rej (gRFC A6, read
// by grpc-go's own retry as well as by levee clients): "-1" when the client
// must not retry (NoRetry, or Throttled), the delay in whole milliseconds
// (rounded up) when there is one, and nil (no trailer) for Deadline
// rejections and rejections without advice.
func Pushback(rej *levee.RejectedError) metadata.MD {
	if rej == nil || rej.Reason == levee.Deadline {
		return nil
	}
	if rej.NoRetry || rej.Reason == levee.Throttled {
		return metadata.MD{wire.MdRetryPushbackMs: noRetryPushback}
	}
	if rej.RetryAfter <= 0 {
		return nil
	}
	return metadata.MD{wire.MdRetryPushbackMs: []string{wire.FormatRetryAfterMs(rej.RetryAfter)}}
}

// noRetryPushback is shared: grpc-go only reads trailer values.
var noRetryPushback = []string{"-1"}

// Rejection reads a levee rejection from err, the error of a gRPC call, and
// trailer, the call's trailer metadata (nil if unknown). It returns nil when
// err is not a levee rejection. The rules, in order:
//
//   - DeadlineExceeded is always a Deadline rejection (the deadline passed
//     somewhere; retrying cannot create time).
//   - Unavailable or ResourceExhausted is a rejection only when the server
//     said so: a levee ErrorInfo in the details, a google.rpc.RetryInfo, or a
//     grpc-retry-pushback-ms trailer. Then Unavailable is Overloaded and
//     ResourceExhausted is Quota; plain Unavailable (connection refused,
//     server stopping) and ResourceExhausted (message too large) are not
//     rejections.
//   - RetryAfter is the longest of the RetryInfo delay, the ErrorInfo delay
//     and the pushback; NoRetry is set by a negative pushback or a
//     "no-retry" ErrorInfo.
//
// An error that already carries a *levee.RejectedError (a local throttle
// decision, a rejection returned by this package's client) is returned as
// it is.
func Rejection(err error, trailer metadata.MD) *levee.RejectedError {
	if err == nil {
		return nil
	}
	if rej := levee.AsRejected(err); rej != nil {
		return rej
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	code := st.Code()
	switch code {
	case codes.DeadlineExceeded:
		return deadlineRejection
	case codes.Unavailable, codes.ResourceExhausted:
	default:
		return nil
	}
	var (
		rej    levee.RejectedError
		marked bool
	)
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if d.GetDomain() != ErrorDomain {
				continue
			}
			md := d.GetMetadata()
			if r, noRetry, ok := wire.ParseReject([]string{md[InfoReject]}); ok {
				marked = true
				rej.Reason = r
				rej.NoRetry = rej.NoRetry || noRetry
			}
			if ra, _, ok := wire.ParseRetryAfterMs([]string{md[InfoRetryAfterMs]}); ok {
				marked = true
				rej.RetryAfter = max(rej.RetryAfter, ra)
			}
		case *errdetails.RetryInfo:
			marked = true
			ra := min(max(d.GetRetryDelay().AsDuration(), 0), wire.MaxRetryAfter)
			rej.RetryAfter = max(rej.RetryAfter, ra)
		}
	}
	if v := trailer[wire.MdRetryPushbackMs]; len(v) > 0 {
		ra, noRetry, ok := wire.ParseRetryAfterMs(v)
		if ok {
			marked = true
			rej.RetryAfter = max(rej.RetryAfter, ra)
		}
		if noRetry {
			marked = true
			rej.NoRetry = true
		}
	}
	if !marked {
		return nil
	}
	// The code decides the reason: a server that says QUOTA on Unavailable
	// is treated by what clients and proxies see, the code.
	if code == codes.ResourceExhausted {
		rej.Reason = levee.Quota
	} else {
		rej.Reason = levee.Overloaded
	}
	if rej.NoRetry {
		rej.RetryAfter = 0
	}
	return &rej
}

var deadlineRejection = inbound.DeadlineNoRetry

// upward is the mid-tier mapping (inbound.MidTier, as leveehttp's): what a
// server tells its own caller when a call it made downstream failed with
// rej. Overloaded (after this tier's retries, or with NoRetry) and
// Throttled (local throttling, exhausted retry budget) → Overloaded with
// NoRetry: only the layer directly above the overloaded one retries.
// Quota → Quota with the downstream delay. Deadline → Deadline.
func upward(rej *levee.RejectedError) *levee.RejectedError {
	if rej == nil {
		return nil
	}
	return inbound.MidTier(rej)
}

var overloadedNoRetry = inbound.OverloadedNoRetry

// Error returns the error a gRPC handler should return for err: when err
// carries a *levee.RejectedError (from this package's client, from
// levee.CheckStage, ...) a status error with the mid-tier mapping of the
// package documentation (downstream overload or throttling → Unavailable
// "no-retry"; quota → ResourceExhausted with its delay; deadline →
// DeadlineExceeded), with levee's status details; otherwise err unchanged.
//
// Servers using this package's interceptors need not call it: they apply the
// same mapping to the handler's error and also send the
// grpc-retry-pushback-ms trailer, which Error alone cannot.
func Error(err error) error {
	rej := levee.AsRejected(err)
	if rej == nil {
		return err
	}
	return Status(upward(rej)).Err()
}

// leveeDetails reports whether st carries levee's ErrorInfo: the status is
// a levee server's decision, not gRPC's own.
func leveeDetails(st *status.Status) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return true
		}
	}
	return false
}
