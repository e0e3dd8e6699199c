package leveegrpc

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/levee-dev/levee"
)

func rej(r levee.Reason, after time.Duration, noRetry bool) *levee.RejectedError {
	return &levee.RejectedError{Reason: r, RetryAfter: after, NoRetry: noRetry}
}

func fmtRej(r *levee.RejectedError) string {
	if r == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{%v %v noRetry=%v}", r.Reason, r.RetryAfter, r.NoRetry)
}

// TestMappingTable checks the table of doc.go: code, pushback trailer, and
// what a levee client reads back from the status alone (tap) and from the
// status plus trailer (interceptors).
func TestMappingTable(t *testing.T) {
	tests := []struct {
		name     string
		in       *levee.RejectedError
		code     codes.Code
		pushback string // "" = no trailer
		// want is what the client reads (same with or without trailer).
		want *levee.RejectedError
	}{
		{"overloaded retry later", rej(levee.Overloaded, 1500*time.Millisecond, false), codes.Unavailable, "1500", rej(levee.Overloaded, 1500*time.Millisecond, false)},
		{"overloaded sub-ms rounds up", rej(levee.Overloaded, 1500*time.Microsecond, false), codes.Unavailable, "2", rej(levee.Overloaded, 2*time.Millisecond, false)},
		{"overloaded no advice", rej(levee.Overloaded, 0, false), codes.Unavailable, "", rej(levee.Overloaded, 0, false)},
		{"overloaded no-retry", rej(levee.Overloaded, time.Second, true), codes.Unavailable, "-1", rej(levee.Overloaded, 0, true)},
		{"throttled is overloaded no-retry", rej(levee.Throttled, 0, false), codes.Unavailable, "-1", rej(levee.Overloaded, 0, true)},
		{"quota with delay", rej(levee.Quota, 250*time.Millisecond, false), codes.ResourceExhausted, "250", rej(levee.Quota, 250*time.Millisecond, false)},
		{"quota no-retry", rej(levee.Quota, 0, true), codes.ResourceExhausted, "-1", rej(levee.Quota, 0, true)},
		{"deadline", rej(levee.Deadline, 0, true), codes.DeadlineExceeded, "", rej(levee.Deadline, 0, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Status(tt.in)
			if st.Code() != tt.code {
				t.Errorf("Status(%s).Code() = %v, want %v", fmtRej(tt.in), st.Code(), tt.code)
			}
			if got := Code(tt.in.Reason); got != tt.code && tt.in.Reason != levee.Throttled {
				t.Errorf("Code(%v) = %v, want %v", tt.in.Reason, got, tt.code)
			}
			md := Pushback(tt.in)
			if got := first(md["grpc-retry-pushback-ms"]); got != tt.pushback {
				t.Errorf("Pushback(%s) = %q, want %q", fmtRej(tt.in), got, tt.pushback)
			}
			// Through the wire: the status error as a client receives it.
			wireErr := status.FromProto(st.Proto()).Err()
			for _, tr := range []metadata.MD{nil, md} {
				got := Rejection(wireErr, tr)
				if !sameRej(got, tt.want) {
					t.Errorf("Rejection(status, trailer %v) = %s, want %s", tr, fmtRej(got), fmtRej(tt.want))
				}
			}
		})
	}
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func sameRej(a, b *levee.RejectedError) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Reason == b.Reason && a.RetryAfter == b.RetryAfter && a.NoRetry == b.NoRetry
}

func TestRejectionNotLevee(t *testing.T) {
	retryInfo, _ := status.New(codes.Unavailable, "x").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)})
	otherDomain, _ := status.New(codes.Unavailable, "x").WithDetails(&errdetails.ErrorInfo{Domain: "example.com", Reason: "OVERLOADED"})
	tests := []struct {
		name    string
		err     error
		trailer metadata.MD
		want    *levee.RejectedError
	}{
		{"nil", nil, nil, nil},
		{"plain error", errors.New("boom"), nil, nil},
		{"plain unavailable", status.Error(codes.Unavailable, "connection refused"), nil, nil},
		{"plain resource exhausted", status.Error(codes.ResourceExhausted, "message too large"), nil, nil},
		{"other domain", otherDomain.Err(), nil, nil},
		{"not found with pushback", status.Error(codes.NotFound, "x"), metadata.Pairs("grpc-retry-pushback-ms", "10"), nil},
		{"unavailable with pushback only", status.Error(codes.Unavailable, "x"), metadata.Pairs("grpc-retry-pushback-ms", "10"), rej(levee.Overloaded, 10*time.Millisecond, false)},
		{"unavailable with -1 only", status.Error(codes.Unavailable, "x"), metadata.Pairs("grpc-retry-pushback-ms", "-1"), rej(levee.Overloaded, 0, true)},
		{"malformed pushback ignored", status.Error(codes.Unavailable, "x"), metadata.Pairs("grpc-retry-pushback-ms", "soon"), nil},
		{"foreign RetryInfo honoured", retryInfo.Err(), nil, rej(levee.Overloaded, 3*time.Second, false)},
		{"deadline without details", status.Error(codes.DeadlineExceeded, "x"), nil, rej(levee.Deadline, 0, true)},
		{"local rejection kept", levee.ErrThrottled, nil, levee.ErrThrottled.(*levee.RejectedError)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Rejection(tt.err, tt.trailer); !sameRej(got, tt.want) {
				t.Errorf("Rejection(%v, %v) = %s, want %s", tt.err, tt.trailer, fmtRej(got), fmtRej(tt.want))
			}
		})
	}
}

// TestErrorMidTier checks the mid-tier mapping a handler gets from Error.
func TestErrorMidTier(t *testing.T) {
	tests := []struct {
		name string
		in   error
		code codes.Code
		want *levee.RejectedError
	}{
		{"downstream overloaded retryable", rej(levee.Overloaded, time.Second, false), codes.Unavailable, rej(levee.Overloaded, 0, true)},
		{"throttled", levee.ErrThrottled, codes.Unavailable, rej(levee.Overloaded, 0, true)},
		{"quota passed through", rej(levee.Quota, 2*time.Second, false), codes.ResourceExhausted, rej(levee.Quota, 2*time.Second, false)},
		{"deadline", levee.CheckStage(canceledCtx(), 0), codes.DeadlineExceeded, rej(levee.Deadline, 0, true)},
		{"wrapped", fmt.Errorf("fetch: %w", levee.ErrOverloaded), codes.Unavailable, rej(levee.Overloaded, 0, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Error(tt.in)
			if got := status.Code(err); got != tt.code {
				t.Errorf("status.Code(Error(%v)) = %v, want %v", tt.in, got, tt.code)
			}
			if got := Rejection(status.FromProto(status.Convert(err).Proto()).Err(), nil); !sameRej(got, tt.want) {
				t.Errorf("client reads %s, want %s", fmtRej(got), fmtRej(tt.want))
			}
		})
	}
	plain := errors.New("app error")
	if got := Error(plain); got != plain {
		t.Errorf("Error(plain) = %v, want it unchanged", got)
	}
}

func canceledCtx() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestStatusShared: the statuses of rejections that differ only below a
// millisecond of delay are one shared value, read back as the same
// rejection; a delay beyond the cache and an unknown reason are built
// afresh with the same content; concurrent first uses agree.
func TestStatusShared(t *testing.T) {
	a := Status(rej(levee.Overloaded, 37200*time.Microsecond, false))
	b := Status(rej(levee.Overloaded, 37900*time.Microsecond, false))
	if a != b {
		t.Errorf("37.2 ms and 37.9 ms built two statuses, want one shared")
	}
	if got := Rejection(status.FromProto(a.Proto()).Err(), nil); !sameRej(got, rej(levee.Overloaded, 38*time.Millisecond, false)) {
		t.Errorf("37.2 ms reads back as %s, want 38ms", fmtRej(got))
	}
	if want := "levee: rejected: overloaded; retry after 38ms"; a.Message() != want {
		t.Errorf("message %q, want %q", a.Message(), want)
	}
	if c := Status(rej(levee.Overloaded, 37*time.Millisecond, false)); c == a {
		t.Errorf("37 ms and 38 ms share a status")
	}
	if c := Status(rej(levee.Overloaded, 37*time.Millisecond, true)); c == Status(rej(levee.Overloaded, 37*time.Millisecond, false)) {
		t.Errorf("no-retry shares a status with retry")
	}
	if x, y := Status(rej(levee.Overloaded, 5*time.Second, true)), Status(rej(levee.Overloaded, 0, true)); x != y {
		t.Errorf("a no-retry rejection's delay, which it does not carry, made a status of its own")
	}
	long := rej(levee.Quota, time.Hour, false)
	if x, y := Status(long), Status(long); x == y || x.Message() != y.Message() || Rejection(x.Err(), nil).RetryAfter != time.Hour {
		t.Errorf("an hour's delay: shared %v, messages %q %q, read back %s", x == y, x.Message(), y.Message(), fmtRej(Rejection(x.Err(), nil)))
	}
	if st := Status(rej(levee.Reason(99), 0, false)); st.Code() != codes.Unavailable || Rejection(st.Err(), nil) == nil {
		t.Errorf("unknown reason: %v, read back %v", st, Rejection(st.Err(), nil))
	}
	if rejectErr(nil) == nil || Status(nil).Code() != codes.Unavailable {
		t.Errorf("nil rejection: %v", rejectErr(nil))
	}
	// Concurrent first uses of one slot: every caller gets an equal status.
	r := rej(levee.Quota, 1234*time.Millisecond, false)
	want := build(&levee.RejectedError{Reason: levee.Quota, RetryAfter: 1234 * time.Millisecond}).st.Message()
	errs := make(chan string, 8)
	for range 8 {
		go func() {
			st, _ := status.FromError(rejectErr(r))
			errs <- st.Message()
		}()
	}
	for range 8 {
		if got := <-errs; got != want {
			t.Errorf("concurrent use: %q, want %q", got, want)
		}
	}
}
