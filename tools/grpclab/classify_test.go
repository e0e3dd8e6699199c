package grpclab

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/leveegrpc"
	"github.com/levee-dev/levee/tools/load"
)

func TestClassify(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		want load.Outcome
		f    load.Failure
	}{
		{"ok", live, nil, load.Goodput, load.OtherFailure},
		{"late ok", gone, nil, load.Failed, load.Timeout},
		{"overloaded", live, leveegrpc.Status(&levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second}).Err(), load.Rejected, load.OtherFailure},
		{"quota", live, leveegrpc.Status(&levee.RejectedError{Reason: levee.Quota}).Err(), load.Rejected, load.OtherFailure},
		{"server deadline", live, leveegrpc.Status(&levee.RejectedError{Reason: levee.Deadline, NoRetry: true}).Err(), load.Rejected, load.OtherFailure},
		{"client deadline", gone, status.Error(codes.DeadlineExceeded, "context deadline exceeded"), load.Failed, load.Timeout},
		{"connection lost", live, status.Error(codes.Unavailable, "connection reset"), load.Failed, load.Reset},
		{"internal", live, status.Error(codes.Internal, "boom"), load.Failed, load.OtherFailure},
	}
	for _, tt := range tests {
		if o, f := Classify(tt.ctx, tt.err); o != tt.want || f != tt.f {
			t.Errorf("%s: %v %v, want %v %v", tt.name, o, f, tt.want, tt.f)
		}
	}
}
