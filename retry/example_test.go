package retry_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/retry"
)

func ExampleDo() {
	err := retry.Do(context.Background(), retry.Policy{}, func(ctx context.Context, attempt int) error {
		// Send the request with Levee-Attempt: attempt (also in levee.CallFrom(ctx)).
		if attempt == 0 {
			return errors.New("invalid argument") // not retryable: returned as is
		}
		return nil
	})
	fmt.Println(err)
	// Output: invalid argument
}

// The stepping form on virtual time, as the simulator drives it: the
// backend says "overloaded, retry after 1s" twice, and the third attempt
// gives up with an error that tells the layer above not to retry.
func ExamplePolicy_Begin() {
	p := retry.Policy{Budget: retry.Unlimited(), Rand: rand.New(rand.NewPCG(1, 2)).Uint64}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := p.Begin(now, now.Add(10*time.Second))
	overloaded := &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second}
	for {
		attempt := a.Attempt()
		wait, retry := a.Next(now, overloaded)
		if !retry {
			break
		}
		fmt.Printf("attempt %d failed; retry after %v\n", attempt, wait.Round(time.Millisecond))
		now = now.Add(wait)
	}
	r := levee.AsRejected(a.Err())
	fmt.Println(r.Reason, "no-retry:", r.NoRetry)
	// Output:
	// attempt 0 failed; retry after 1.385s
	// attempt 1 failed; retry after 1.308s
	// overloaded no-retry: true
}

// The founding text's budget: 60 retries per process per minute, then fail
// at once without sending.
func ExampleNewBudget() {
	b := retry.NewBudget(retry.WithRatio(0, 0), retry.WithFloor(60, time.Minute))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	granted := 0
	for range 100 {
		if b.TryRetryAt(now) {
			granted++
		}
	}
	fmt.Println(granted, b.TryRetryAt(now.Add(time.Minute)))
	// Output: 60 true
}

func ExamplePolicy_Backoff() {
	seed := retry.Policy{Base: 3 * time.Second, Cap: 12 * time.Second, Jitter: retry.NoJitter, MaxAttempts: 4}
	for n := 1; n <= 3; n++ {
		fmt.Print(seed.Backoff(n, 0, 0), " ")
	}
	fmt.Println()
	// Output: 3s 6s 12s
}
