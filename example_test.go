package levee_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/levee-dev/levee"
)

func ExampleParseCriticality() {
	for _, s := range []string{"SHEDDABLE_PLUS", "4", "urgent"} {
		c, err := levee.ParseCriticality(s)
		fmt.Println(c, c.Number(), err != nil)
	}
	// Output:
	// SHEDDABLE_PLUS 2 false
	// CRITICAL_PLUS 4 false
	// CRITICAL 3 true
}

func ExampleWithCall() {
	ctx := levee.WithCall(context.Background(), levee.Call{
		Criticality: levee.SheddablePlus,
		Tenant:      "batch-reports",
	})
	call := levee.CallFrom(ctx)
	fmt.Println(call.Criticality, call.Tenant, call.Attempt)
	// Output: SHEDDABLE_PLUS batch-reports 0
}

func ExampleRejectedError() {
	var err error = fmt.Errorf("fetch profile: %w",
		&levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 2 * time.Second})
	if errors.Is(err, levee.ErrOverloaded) {
		r := levee.AsRejected(err)
		fmt.Println("back off for", r.RetryAfter, "no-retry:", r.NoRetry)
	}
	// Output: back off for 2s no-retry: false
}

func ExampleCheckStage() {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// The next stage usually takes 200 ms: it cannot finish in time, so it
	// is not started.
	if err := levee.CheckStage(ctx, 200*time.Millisecond); err != nil {
		fmt.Println(err)
	}
	// Output: levee: rejected: deadline; no-retry
}
