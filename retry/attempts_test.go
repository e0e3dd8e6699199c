package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
)

func seeded(seed uint64) func() uint64 { return rand.New(rand.NewPCG(seed, 1)).Uint64 }

func TestNext(t *testing.T) {
	app := errors.New("app")
	type step struct {
		err   error
		retry bool
	}
	tests := []struct {
		name   string
		p      Policy
		window time.Duration // deadline − start
		steps  []step
		stop   Stop
	}{
		{"success first", Policy{}, time.Minute, []step{{nil, false}}, StopPermanent},
		{"two retries then give up", Policy{}, time.Minute,
			[]step{{errOverloaded(0), true}, {errOverloaded(0), true}, {errOverloaded(0), false}}, StopAttempts},
		{"max attempts 1", Policy{MaxAttempts: 1}, time.Minute, []step{{errOverloaded(0), false}}, StopAttempts},
		{"naive 5 attempts", Policy{MaxAttempts: 5}, time.Minute,
			[]step{{errOverloaded(0), true}, {errOverloaded(0), true}, {errOverloaded(0), true}, {errOverloaded(0), true}, {errOverloaded(0), false}}, StopAttempts},
		{"app error not retried", Policy{}, time.Minute, []step{{app, false}}, StopPermanent},
		{"no-retry not retried", Policy{}, time.Minute, []step{{&levee.RejectedError{Reason: levee.Overloaded, NoRetry: true}, false}}, StopPermanent},
		{"throttled not retried", Policy{}, time.Minute, []step{{levee.ErrThrottled, false}}, StopPermanent},
		{"deadline not retried", Policy{}, time.Minute, []step{{levee.ErrDeadline, false}}, StopPermanent},
		{"quota without delay", Policy{}, time.Minute, []step{{&levee.RejectedError{Reason: levee.Quota}, false}}, StopPermanent},
		{"quota after its delay", Policy{}, time.Minute, []step{{&levee.RejectedError{Reason: levee.Quota, RetryAfter: time.Second}, true}, {nil, false}}, StopPermanent},
		{"pushback past deadline", Policy{}, time.Second, []step{{errOverloaded(2 * time.Second), false}}, StopDeadline},
		{"backoff past deadline", Policy{Base: time.Minute, Jitter: NoJitter, Cap: time.Hour}, time.Second, []step{{errOverloaded(0), false}}, StopDeadline},
		{"not idempotent: overload not retried", Policy{NotIdempotent: true}, time.Minute, []step{{errOverloaded(0), false}}, StopPermanent},
		{"not idempotent: unsent retried", Policy{NotIdempotent: true}, time.Minute, []step{{Unsent(app), true}, {nil, false}}, StopPermanent},
		{"budget exhausted", Policy{Budget: NewBudget(WithRatio(0, 0), WithFloor(1, time.Hour))}, time.Minute,
			[]step{{errOverloaded(0), true}, {errOverloaded(0), false}}, StopBudget},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			if p.Budget == nil {
				p.Budget = Unlimited()
			}
			p.Rand = seeded(1)
			now := t0
			a := p.Begin(now, now.Add(tt.window))
			for i, s := range tt.steps {
				if got := a.Attempt(); got != i {
					t.Fatalf("step %d: Attempt() = %d", i, got)
				}
				wait, retry := a.Next(now, s.err)
				if retry != s.retry {
					t.Fatalf("step %d (%v): retry = %v, want %v; Err = %v", i, s.err, retry, s.retry, a.Err())
				}
				if retry {
					if pb := pushback(s.err); wait < pb || wait > pb*3/2+p.Ceiling(i+1) {
						t.Errorf("step %d: wait %v, want ≥ pushback %v", i, wait, pb)
					}
					now = now.Add(wait)
				}
			}
			last := tt.steps[len(tt.steps)-1].err
			err := a.Err()
			switch {
			case last == nil:
				if err != nil {
					t.Errorf("Err() = %v after success", err)
				}
			case tt.stop == StopPermanent:
				if err != last {
					t.Errorf("Err() = %v, want the last error itself", err)
				}
			default:
				var g *GiveUpError
				if !errors.As(err, &g) || g.Stop != tt.stop || g.Attempts != len(tt.steps) {
					t.Errorf("Err() = %v, want a GiveUpError stop %v after %d attempts", err, tt.stop, len(tt.steps))
				}
			}
		})
	}
}

func TestRetryAfterHonouredAndCapped(t *testing.T) {
	p := Policy{Budget: Unlimited(), Rand: seeded(3)}
	for _, tt := range []struct {
		pushback, left time.Duration
		retry          bool
	}{
		{time.Second, 10 * time.Second, true},
		{5 * time.Second, 10 * time.Second, true},
		{10 * time.Second, 10 * time.Second, false},
		{20 * time.Second, 10 * time.Second, false},
	} {
		for range 100 {
			a := p.Begin(t0, t0.Add(tt.left))
			wait, retry := a.Next(t0, errOverloaded(tt.pushback))
			if retry != tt.retry {
				t.Fatalf("pushback %v, %v left: retry %v, want %v", tt.pushback, tt.left, retry, tt.retry)
			}
			if retry && (wait < tt.pushback || wait >= tt.left) {
				t.Fatalf("pushback %v, %v left: wait %v, want in [pushback, time left)", tt.pushback, tt.left, wait)
			}
			if !retry && !errors.Is(a.Err(), levee.ErrOverloaded) {
				t.Fatalf("gave up with %v, want an overload", a.Err())
			}
		}
	}
}

func TestBeginDefaultDeadline(t *testing.T) {
	if got := (Policy{}).Begin(t0, time.Time{}).Deadline(); !got.Equal(t0.Add(DefaultTimeout)) {
		t.Errorf("default deadline %v, want now+%v", got, DefaultTimeout)
	}
	if got := (Policy{Timeout: time.Second}).Begin(t0, time.Time{}).Deadline(); !got.Equal(t0.Add(time.Second)) {
		t.Errorf("deadline %v, want now+1s", got)
	}
}

func TestBeginCountsRequest(t *testing.T) {
	b := NewBudget()
	Policy{Budget: b}.Begin(t0, time.Time{})
	if st := b.Stats(); st.Requests != 1 {
		t.Errorf("budget saw %d requests, want 1", st.Requests)
	}
}

func TestDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var attempts []int
		var ctxAttempts []int
		var deadlines []time.Time
		start := time.Now()
		err := Do(context.Background(), Policy{Budget: Unlimited(), Rand: seeded(5)}, func(ctx context.Context, attempt int) error {
			attempts = append(attempts, attempt)
			ctxAttempts = append(ctxAttempts, levee.AttemptFrom(ctx))
			dl, _ := ctx.Deadline()
			deadlines = append(deadlines, dl)
			if attempt < 2 {
				return errOverloaded(0)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Do = %v, want nil", err)
		}
		if len(attempts) != 3 || attempts[2] != 2 || ctxAttempts[1] != 1 || ctxAttempts[2] != 2 {
			t.Errorf("attempts %v, ctx attempts %v, want 0 1 2", attempts, ctxAttempts)
		}
		if !deadlines[0].Equal(start.Add(DefaultTimeout)) {
			t.Errorf("deadline %v, want start+DefaultTimeout", deadlines[0].Sub(start))
		}
		if el := time.Since(start); el <= 0 || el > 300*time.Millisecond {
			t.Errorf("Do took %v of fake time, want within the first two backoffs (≤ 300ms)", el)
		}
	})
}

// TestDoPauses: Do's wait between attempts pauses the request its context
// belongs to (levee.Pauser), once per wait, and only then.
func TestDoPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingPauser{}
		ctx := levee.WithPauser(context.Background(), p)
		openDuring := -1
		err := Do(ctx, Policy{Budget: Unlimited(), Rand: seeded(5)}, func(ctx context.Context, attempt int) error {
			if attempt > 0 {
				openDuring = p.open
			}
			if attempt < 2 {
				return errOverloaded(0)
			}
			return nil
		})
		if err != nil || p.pauses != 2 || p.open != 0 || openDuring != 0 {
			t.Errorf("Do = %v with %d pauses, %d open after, %d open during an attempt; want nil, 2, 0, 0", err, p.pauses, p.open, openDuring)
		}
	})
}

// countingPauser counts the pauses a wait makes (levee.Pauser).
type countingPauser struct{ pauses, open int }

func (p *countingPauser) Pause()   { p.pauses++; p.open++ }
func (p *countingPauser) Unpause() { p.open-- }

func TestDoGivesUpNoRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		err := Do(context.Background(), Policy{Budget: Unlimited()}, func(ctx context.Context, attempt int) error {
			n++
			return errOverloaded(0)
		})
		if n != 3 {
			t.Errorf("%d attempts, want 3", n)
		}
		if r := levee.AsRejected(err); r == nil || r.Reason != levee.Overloaded || !r.NoRetry {
			t.Errorf("Do = %v, want overloaded; no-retry", err)
		}
	})
}

func TestDoAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		err := Do(context.Background(), Policy{Budget: Unlimited(), AttemptTimeout: time.Second, Timeout: time.Minute}, func(ctx context.Context, attempt int) error {
			n++
			if attempt == 2 {
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		})
		if err != nil || n != 3 {
			t.Errorf("Do = %v after %d attempts, want nil after 3 (timed-out attempts are retried)", err, n)
		}
	})
}

func TestDoStopsWhenCallerGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		err := Do(ctx, Policy{Budget: Unlimited(), Base: time.Hour, Jitter: NoJitter, Cap: time.Hour, Timeout: 3 * time.Hour}, func(ctx context.Context, attempt int) error {
			n++
			time.AfterFunc(time.Minute, cancel)
			return errOverloaded(0)
		})
		if n != 1 || !errors.Is(err, levee.ErrOverloaded) {
			t.Errorf("Do = %v after %d attempts, want the overload after 1", err, n)
		}
	})
}

func TestDoKeepsCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable, Tenant: "t1", Attempt: 2})
		Do(ctx, Policy{MaxAttempts: 1}, func(ctx context.Context, attempt int) error {
			c := levee.CallFrom(ctx)
			if c.Criticality != levee.Sheddable || c.Tenant != "t1" || c.Attempt != 0 {
				t.Errorf("call in attempt: %+v, want Sheddable, t1, attempt 0", c)
			}
			return nil
		})
	})
}

// TestNextGated: the gate is asked after every other check and before the
// budget; its refusal ends the call with its error and spends no token.
func TestNextGated(t *testing.T) {
	refuse := errors.New("throttled")
	over := &levee.RejectedError{Reason: levee.Overloaded}
	tests := []struct {
		name      string
		err       error
		gate      error
		wantRetry bool
		wantAsked bool
		wantErr   error
	}{
		{"gate allows", over, nil, true, true, nil},
		{"gate refuses", over, refuse, false, true, refuse},
		{"permanent error: gate not asked", errors.New("app"), refuse, false, false, nil},
	}
	for _, tt := range tests {
		b := NewBudget(WithRatio(0, 0), WithFloor(10, time.Minute))
		var a Attempts
		a.Init(Policy{Budget: b, Rand: func() uint64 { return 0 }}, t0, t0.Add(time.Minute))
		asked := false
		_, retry := a.NextGated(t0, tt.err, func(time.Time) error { asked = true; return tt.gate })
		if retry != tt.wantRetry || asked != tt.wantAsked {
			t.Errorf("%s: retry %v, gate asked %v; want %v, %v", tt.name, retry, asked, tt.wantRetry, tt.wantAsked)
		}
		if tt.wantErr != nil && a.Err() != tt.wantErr {
			t.Errorf("%s: Err = %v, want %v", tt.name, a.Err(), tt.wantErr)
		}
		if got, want := b.Stats().Retries, map[bool]uint64{true: 1}[tt.wantRetry]; got != want {
			t.Errorf("%s: budget granted %d retries, want %d", tt.name, got, want)
		}
	}
}
