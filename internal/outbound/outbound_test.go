package outbound

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
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clock is a virtual clock: Sleep advances it and records the wait.
type clock struct {
	now   time.Time
	waits []time.Duration
}

func (c *clock) Now() time.Time { return c.now }
func (c *clock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return nil
}

func testCall(c *clock) Call {
	return Call{
		Policy:      retry.Policy{Budget: retry.Unlimited(), Rand: func() uint64 { return 1 << 62 }},
		Criticality: levee.Critical,
		Margin:      DefaultMargin,
		Now:         c.Now,
		Sleep:       c.Sleep,
	}
}

var (
	overloaded = &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 20 * time.Millisecond}
	noRetry    = &levee.RejectedError{Reason: levee.Overloaded, NoRetry: true}
)

func TestLeft(t *testing.T) {
	tests := []struct {
		left, margin, want time.Duration
		ok                 bool
	}{
		{10 * time.Second, DefaultMargin, 10*time.Second - DefaultMargin, true},
		{50 * time.Millisecond, DefaultMargin, 45 * time.Millisecond, true}, // a tenth at most
		{time.Second, -time.Second, time.Second, true},                      // negative margin is 0
		{1100 * time.Microsecond, time.Hour, 990 * time.Microsecond, false},
		{0, DefaultMargin, 0, false},
		{-time.Second, DefaultMargin, -time.Second, false},
	}
	for _, tt := range tests {
		got, ok := Left(t0, t0.Add(tt.left), tt.margin)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Left(%v, margin %v) = %v, %v; want %v, %v", tt.left, tt.margin, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name     string
		policy   func(*retry.Policy)
		call     func(*Call)
		deadline time.Duration
		answers  []error // per attempt; beyond the list: success
		wantSent int
		wantErr  func(error) bool
		wantLeft []time.Duration // the budget advertised per attempt
	}{
		{name: "success", deadline: time.Second, wantSent: 1,
			wantErr: isNil, wantLeft: []time.Duration{990 * time.Millisecond}},
		{name: "overload retried", deadline: 10 * time.Second, answers: []error{overloaded, overloaded}, wantSent: 3,
			wantErr: isNil},
		{name: "overload gives up no-retry", deadline: 10 * time.Second, answers: []error{overloaded, overloaded, overloaded}, wantSent: 3,
			wantErr: func(err error) bool {
				ge, ok := errors.AsType[*retry.GiveUpError](err)
				r := levee.AsRejected(err)
				return ok && ge.Stop == retry.StopAttempts && ge.Err == overloaded && r.NoRetry
			}},
		{name: "no-retry not retried", deadline: 10 * time.Second, answers: []error{noRetry}, wantSent: 1,
			wantErr: func(err error) bool { return err == noRetry }},
		{name: "one shot", deadline: 10 * time.Second, answers: []error{overloaded}, wantSent: 1,
			call:    func(c *Call) { c.OneShot = true },
			wantErr: func(err error) bool { return err == overloaded }},
		{name: "not idempotent", deadline: 10 * time.Second, answers: []error{retry.Retryable(errors.New("reset")), nil}, wantSent: 1,
			policy:  func(p *retry.Policy) { p.NotIdempotent = true },
			wantErr: func(err error) bool { return err != nil && retry.Classify(err) == retry.Transient }},
		{name: "not idempotent unsent retried", deadline: 10 * time.Second, answers: []error{retry.Unsent(errors.New("refused"))}, wantSent: 2,
			policy:  func(p *retry.Policy) { p.NotIdempotent = true },
			wantErr: isNil},
		{name: "no time left", deadline: 900 * time.Microsecond, wantSent: 0,
			wantErr: func(err error) bool { return err == ErrLocalDeadline }},
		{name: "retry wait past deadline", deadline: 30 * time.Millisecond, answers: []error{&levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second}}, wantSent: 1,
			wantErr: func(err error) bool {
				ge, ok := errors.AsType[*retry.GiveUpError](err)
				return ok && ge.Stop == retry.StopDeadline
			}},
		{name: "attempt timeout advertised", deadline: 10 * time.Second, wantSent: 1,
			policy:  func(p *retry.Policy) { p.AttemptTimeout = time.Second },
			wantErr: isNil, wantLeft: []time.Duration{990 * time.Millisecond}},
		{name: "classify marks", deadline: 10 * time.Second, answers: []error{errors.New("dial")}, wantSent: 2,
			call:    func(c *Call) { c.Classify = retry.Unsent },
			wantErr: isNil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{now: t0}
			c := testCall(clk)
			if tt.policy != nil {
				tt.policy(&c.Policy)
			}
			if tt.call != nil {
				tt.call(&c)
			}
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(time.Hour))
			defer cancel()
			// The call's deadline on the virtual clock.
			vctx := &deadlineCtx{Context: ctx, dl: t0.Add(tt.deadline)}
			var left []time.Duration
			sent := 0
			err := c.Run(vctx, func(a Attempt) error {
				if a.N != sent {
					t.Errorf("attempt %d numbered %d", sent, a.N)
				}
				left = append(left, a.Left)
				sent++
				if a.N < len(tt.answers) {
					return tt.answers[a.N]
				}
				a.Release()
				return nil
			})
			if sent != tt.wantSent {
				t.Errorf("sent %d attempts, want %d", sent, tt.wantSent)
			}
			if !tt.wantErr(err) {
				t.Errorf("err = %v", err)
			}
			if tt.wantLeft != nil && fmt.Sprint(left) != fmt.Sprint(tt.wantLeft) {
				t.Errorf("advertised %v, want %v", left, tt.wantLeft)
			}
		})
	}
}

func isNil(err error) bool { return err == nil }

// deadlineCtx reports a virtual deadline without enforcing it.
type deadlineCtx struct {
	context.Context
	dl time.Time
}

func (c *deadlineCtx) Deadline() (time.Time, bool) { return c.dl, true }

// TestRunOwnTimeout: an attempt that runs out of its own time while the
// call has time left is retried without going through Classify (which
// would read gRPC's DEADLINE_EXCEEDED as a deadline rejection, never
// retried), and counts against the backend.
func TestRunOwnTimeout(t *testing.T) {
	clk := &clock{now: time.Now()}
	c := testCall(clk)
	c.Policy.AttemptTimeout = 20 * time.Millisecond
	c.Throttle = throttle.New()
	for range 100 { // a healthy history: one timeout must not throttle the retry
		_ = c.Throttle.AllowAt(clk.now, levee.Critical)
		c.Throttle.DoneAt(clk.now, levee.Critical, true)
	}
	classified := 0
	c.Classify = func(err error) error {
		classified++
		return &levee.RejectedError{Reason: levee.Deadline, NoRetry: true}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	sent := 0
	err := c.Run(ctx, func(a Attempt) error {
		sent++
		if a.N == 0 {
			<-a.Ctx.Done()
			return errors.New("rpc error: code = DeadlineExceeded")
		}
		a.Release()
		return nil
	})
	if err != nil || sent != 2 || classified != 0 {
		t.Errorf("err %v after %d attempts, %d classified; want nil after 2, none classified", err, sent, classified)
	}
	st := c.Throttle.Stats()
	if got := st.Completed[levee.Critical] - st.Accepts[levee.Critical]; got != 1 || st.Rejected[levee.Critical] != 0 {
		t.Errorf("%d attempts counted as not accepted, want 1 (the timeout)", got)
	}
}

// TestRunThrottled: a refusal by the throttle ends the call without
// sending, as a Throttled rejection.
func TestRunThrottled(t *testing.T) {
	clk := &clock{now: t0}
	th := throttle.New()
	for i := range 2000 { // a backend that rejected everything
		at := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if th.AllowAt(at, levee.Critical) == nil {
			th.DoneAt(at, levee.Critical, false)
		}
	}
	clk.now = t0.Add(20 * time.Second)
	refused := 0
	for range 100 {
		c := testCall(clk)
		c.Throttle = th
		c.Policy.MaxAttempts = 1
		sent := false
		err := c.Run(&deadlineCtx{Context: context.Background(), dl: clk.now.Add(time.Second)}, func(a Attempt) error {
			sent = true
			return overloaded
		})
		if errors.Is(err, levee.ErrThrottled) {
			refused++
			if sent {
				t.Fatal("a throttled call was sent")
			}
		}
	}
	if refused < 50 {
		t.Errorf("%d of 100 calls throttled, want most", refused)
	}
}

// TestRunWaitInterrupted: a caller that goes away during the backoff gets
// a *retry.GiveUpError at once.
func TestRunWaitInterrupted(t *testing.T) {
	clk := &clock{now: t0}
	c := testCall(clk)
	ctx, cancel := context.WithCancel(context.Background())
	c.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	err := c.Run(&deadlineCtx{Context: ctx, dl: t0.Add(time.Minute)}, func(Attempt) error { return overloaded })
	ge, ok := errors.AsType[*retry.GiveUpError](err)
	if !ok || ge.Err != overloaded || ge.Stop != retry.StopDeadline {
		t.Errorf("err = %v, want a GiveUpError(deadline) around the overload", err)
	}
}

// TestReport: what each failure teaches the throttle.
func TestReport(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		ctxErr  error
		own     bool
		want    Outcome
		counted bool
	}{
		{"overload", overloaded, nil, false, Overload, true},
		{"quota", &levee.RejectedError{Reason: levee.Quota}, nil, false, Overload, true},
		{"deadline answer", &levee.RejectedError{Reason: levee.Deadline}, nil, false, Answered, true},
		{"own timeout", errors.New("whatever"), nil, true, Overload, true},
		{"call deadline passed", context.DeadlineExceeded, context.DeadlineExceeded, false, Overload, true},
		{"caller gone", overloaded, context.Canceled, false, Unreached, false},
		{"refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, nil, false, Unreached, false},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), nil, false, Unreached, false},
		{"dns", &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, nil, false, Unreached, false},
		{"dns timeout", &net.DNSError{Err: "timeout", Name: "x", IsTimeout: true}, nil, false, Unreached, false},
		{"net timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, nil, false, Overload, true},
		{"other", errors.New("EOF"), nil, false, Unreached, false},
	}
	for _, tt := range tests {
		th := throttle.New()
		c := Call{Throttle: th, Criticality: levee.Sheddable}
		ctx := context.Background()
		if tt.ctxErr != nil {
			var cancel context.CancelFunc
			if tt.ctxErr == context.Canceled {
				ctx, cancel = context.WithCancel(ctx)
			} else {
				ctx, cancel = context.WithDeadline(ctx, time.Now().Add(-time.Second))
			}
			cancel()
		}
		c.report(ctx, t0, tt.err, tt.own)
		st := th.Stats()
		done, acc := st.Completed[levee.Sheddable], st.Accepts[levee.Sheddable]
		got := Unreached
		switch {
		case done == 1 && acc == 1:
			got = Answered
		case done == 1:
			got = Overload
		}
		if got != tt.want {
			t.Errorf("%s: reported %v, want %v", tt.name, got, tt.want)
		}
		if tt.ctxErr == nil && !tt.own {
			if j := Judge(tt.err); j != tt.want {
				t.Errorf("%s: Judge = %v, want %v", tt.name, j, tt.want)
			}
		}
	}
}

func TestBound(t *testing.T) {
	ctx, cancel := Bound(context.Background(), t0, retry.Policy{})
	dl, ok := ctx.Deadline()
	if cancel == nil || !ok || !dl.Equal(t0.Add(retry.DefaultTimeout)) {
		t.Errorf("no deadline: got %v %v, want now + DefaultTimeout", dl, ok)
	}
	cancel()
	ctx, cancel = Bound(context.Background(), t0, retry.Policy{Timeout: time.Second})
	if dl, _ := ctx.Deadline(); !dl.Equal(t0.Add(time.Second)) {
		t.Errorf("policy timeout: deadline %v, want now + 1s", dl)
	}
	cancel()
	parent, pcancel := context.WithDeadline(context.Background(), t0.Add(time.Minute))
	defer pcancel()
	if ctx, cancel := Bound(parent, t0, retry.Policy{}); ctx != parent || cancel != nil {
		t.Error("a context with a deadline was bounded again")
	}
}

func TestSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); err != context.Canceled {
		t.Errorf("Sleep on a cancelled context = %v, want context.Canceled", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Errorf("Sleep(0) = %v, want nil", err)
	}
	if err := Sleep(context.Background(), time.Microsecond); err != nil {
		t.Errorf("Sleep(1µs) = %v, want nil", err)
	}
	// The request the context belongs to is paused for the wait, and
	// only for a real one.
	p := &countingPauser{}
	pctx := levee.WithPauser(context.Background(), p)
	_ = Sleep(pctx, 0)
	if err := Sleep(pctx, time.Microsecond); err != nil || p.pauses != 1 || p.open != 0 {
		t.Errorf("Sleep with a Pauser = %v, %d pauses, %d still open; want nil, 1, 0", err, p.pauses, p.open)
	}
}

// countingPauser counts the pauses a wait makes (levee.Pauser).
type countingPauser struct{ pauses, open int }

func (p *countingPauser) Pause()   { p.pauses++; p.open++ }
func (p *countingPauser) Unpause() { p.open-- }

// TestRetryBudgetSpentOnlyOnSentRetries: the throttle is asked before the
// retry budget, so every token the budget grants is a retry that was sent
// (a retry the throttle refuses used to cost a token first).
func TestRetryBudgetSpentOnlyOnSentRetries(t *testing.T) {
	clk := &clock{now: t0}
	th := throttle.New()
	budget := retry.NewBudget()
	sentRetries, throttled := 0, 0
	for i := range 3000 {
		clk.now = t0.Add(time.Duration(i) * 20 * time.Millisecond)
		c := testCall(clk)
		c.Policy.Budget = budget
		c.Throttle = th
		sent := 0
		err := c.Run(&deadlineCtx{Context: context.Background(), dl: clk.now.Add(time.Minute)}, func(a Attempt) error {
			sent++
			if a.N > 0 {
				sentRetries++
			}
			return overloaded // the backend sheds everything
		})
		if sent > 0 && errors.Is(err, levee.ErrThrottled) {
			throttled++ // a retry refused by the throttle
		}
	}
	granted := budget.Stats().Retries
	t.Logf("%d retries sent, %d granted by the budget, %d retries refused by the throttle", sentRetries, granted, throttled)
	if throttled == 0 {
		t.Fatal("the throttle never refused a retry: the test does not exercise the order")
	}
	if int(granted) != sentRetries {
		t.Errorf("budget granted %d retries, %d were sent: a refused retry spent a token", granted, sentRetries)
	}
}
