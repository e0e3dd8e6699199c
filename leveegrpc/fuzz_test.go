package leveegrpc

import (
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
)

// FuzzRejection feeds Rejection hostile statuses and trailers: it must
// never panic, must keep its invariants (delay within bounds, no delay
// with no-retry, reason given by the code), and must read back exactly what
// Status and Pushback wrote.
func FuzzRejection(f *testing.F) {
	f.Add(uint32(codes.Unavailable), "1500", "overloaded", "1500", int64(1500e6), uint8(1), int64(0))
	f.Add(uint32(codes.Unavailable), "-1", "overloaded; no-retry", "", int64(-1), uint8(1), int64(0))
	f.Add(uint32(codes.ResourceExhausted), "9999999999999", "quota", "x", int64(1<<62), uint8(2), int64(1e9))
	f.Add(uint32(codes.DeadlineExceeded), "", "", "", int64(0), uint8(3), int64(-5))
	f.Add(uint32(codes.NotFound), "10", "OVERLOADED;NO-RETRY", "NaN", int64(0), uint8(4), int64(1))
	f.Fuzz(func(t *testing.T, code uint32, pushback, reject, retryMs string, retryInfo int64, reason uint8, after int64) {
		st := status.New(codes.Code(code%20), "m")
		var details []protoadapt.MessageV1
		if reject != "" || retryMs != "" {
			details = append(details, &errdetails.ErrorInfo{Domain: ErrorDomain, Metadata: map[string]string{InfoReject: reject, InfoRetryAfterMs: retryMs}})
		}
		if retryInfo >= 0 {
			details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(time.Duration(retryInfo))})
		}
		if st.Code() != codes.OK && len(details) > 0 {
			if s2, err := st.WithDetails(details...); err == nil {
				st = s2
			}
		}
		var tr metadata.MD
		if pushback != "" {
			tr = metadata.Pairs(wire.MdRetryPushbackMs, pushback)
		}
		r := Rejection(st.Err(), tr)
		if r != nil {
			if r.RetryAfter < 0 || r.RetryAfter > wire.MaxRetryAfter {
				t.Errorf("RetryAfter %v out of [0, %v]", r.RetryAfter, wire.MaxRetryAfter)
			}
			if r.NoRetry && r.RetryAfter != 0 && r.Reason != levee.Deadline {
				t.Errorf("NoRetry with RetryAfter %v", r.RetryAfter)
			}
			if got := Code(r.Reason); got != st.Code() {
				t.Errorf("reason %v (code %v) read from a %v status", r.Reason, got, st.Code())
			}
		}

		// Round trip of what levee itself sends.
		in := &levee.RejectedError{Reason: levee.Reason(reason%5 + 1), RetryAfter: time.Duration(after) % wire.MaxRetryAfter, NoRetry: reason&8 != 0}
		if in.RetryAfter < 0 {
			in.RetryAfter = -in.RetryAfter
		}
		sent := Status(in)
		got := Rejection(status.FromProto(sent.Proto()).Err(), Pushback(in))
		if got == nil {
			t.Fatalf("Rejection(Status(%s)) = nil", fmtRej(in))
		}
		if got.Reason == levee.Deadline {
			return
		}
		wantNoRetry := in.NoRetry || in.Reason == levee.Throttled || in.Reason > levee.Throttled
		if got.NoRetry != wantNoRetry {
			t.Errorf("Rejection(Status(%s)).NoRetry = %v, want %v", fmtRej(in), got.NoRetry, wantNoRetry)
		}
		if !wantNoRetry && got.RetryAfter != ceilMs(in.RetryAfter) {
			t.Errorf("Rejection(Status(%s)).RetryAfter = %v, want %v", fmtRej(in), got.RetryAfter, ceilMs(in.RetryAfter))
		}
	})
}
