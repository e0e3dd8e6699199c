package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

func TestClassify(t *testing.T) {
	app := errors.New("application error")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, Permanent},
		{"application error", app, Permanent},
		{"overloaded", errOverloaded(0), Transient},
		{"overloaded with pushback", errOverloaded(time.Second), Transient},
		{"overloaded wrapped", fmt.Errorf("call: %w", errOverloaded(0)), Transient},
		{"overloaded no-retry", &levee.RejectedError{Reason: levee.Overloaded, NoRetry: true}, Permanent},
		{"quota with delay", &levee.RejectedError{Reason: levee.Quota, RetryAfter: time.Second}, Transient},
		{"quota without delay", &levee.RejectedError{Reason: levee.Quota}, Permanent},
		{"quota no-retry", &levee.RejectedError{Reason: levee.Quota, RetryAfter: time.Second, NoRetry: true}, Permanent},
		{"deadline", levee.ErrDeadline, Permanent},
		{"throttled", levee.ErrThrottled, Permanent},
		{"canceled", context.Canceled, Permanent},
		{"deadline exceeded", context.DeadlineExceeded, Permanent},
		{"connection refused", refused, NotSent},
		{"marked retryable", Retryable(app), Transient},
		{"marked unsent", Unsent(app), NotSent},
		{"throttled wins over a mark", Retryable(levee.ErrThrottled), Permanent},
		{"no-retry wins over a mark", Unsent(&levee.RejectedError{Reason: levee.Overloaded, NoRetry: true}), Permanent},
		{"marked attempt timeout", Retryable(context.DeadlineExceeded), Transient},
		{"give-up upward", &GiveUpError{Err: errOverloaded(0), Attempts: 3, Stop: StopAttempts}, Permanent},
		{"budget give-up upward", &GiveUpError{Err: app, Attempts: 1, Stop: StopBudget}, Permanent},
	}
	for _, tt := range tests {
		if got := Classify(tt.err); got != tt.want {
			t.Errorf("%s: Classify(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
	if Retryable(nil) != nil || Unsent(nil) != nil {
		t.Error("marking nil must give nil")
	}
	if !errors.Is(Retryable(app), app) || !errors.Is(Unsent(app), app) {
		t.Error("marks must unwrap to the error")
	}
}

func TestGiveUpErrorSaysNoRetry(t *testing.T) {
	app := errors.New("boom")
	tests := []struct {
		name        string
		err         *GiveUpError
		reason      levee.Reason
		noRetry     bool
		budget      bool
		isOverload  bool
		retryAfter  time.Duration
		wantMessage string
	}{
		{"overload after retries", &GiveUpError{Err: errOverloaded(time.Second), Attempts: 3, Stop: StopAttempts},
			levee.Overloaded, true, false, true, 0,
			"retry: gave up after 3 attempts (attempts): levee: rejected: overloaded; retry after 1s"},
		{"budget on an app error", &GiveUpError{Err: Retryable(app), Attempts: 1, Stop: StopBudget},
			levee.Overloaded, true, true, true, 0, "retry: gave up after 1 attempts (budget): boom"},
		{"quota keeps its delay", &GiveUpError{Err: &levee.RejectedError{Reason: levee.Quota, RetryAfter: time.Minute}, Attempts: 1, Stop: StopDeadline},
			levee.Quota, false, false, false, time.Minute, "retry: gave up after 1 attempts (deadline): levee: rejected: quota; retry after 1m0s"},
	}
	for _, tt := range tests {
		r := levee.AsRejected(tt.err)
		if r == nil || r.Reason != tt.reason || r.NoRetry != tt.noRetry || r.RetryAfter != tt.retryAfter {
			t.Errorf("%s: AsRejected = %+v, want reason %v no-retry %v retry-after %v", tt.name, r, tt.reason, tt.noRetry, tt.retryAfter)
		}
		if got := errors.Is(tt.err, ErrBudgetExhausted); got != tt.budget {
			t.Errorf("%s: errors.Is(ErrBudgetExhausted) = %v, want %v", tt.name, got, tt.budget)
		}
		if got := errors.Is(tt.err, levee.ErrOverloaded); got != tt.isOverload {
			t.Errorf("%s: errors.Is(ErrOverloaded) = %v, want %v", tt.name, got, tt.isOverload)
		}
		if !errors.Is(tt.err, tt.err.Err) {
			t.Errorf("%s: does not unwrap to the last error", tt.name)
		}
		if got := tt.err.Error(); got != tt.wantMessage {
			t.Errorf("%s: message %q, want %q", tt.name, got, tt.wantMessage)
		}
	}
}
