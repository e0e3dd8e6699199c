package outbound_test

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/outbound"
	"github.com/levee-dev/levee/retry"
)

// A protocol adapter fills a Call and sends each attempt in Run's
// callback; here the backend sheds the first attempt, on virtual time.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := outbound.Call{
		Policy:      retry.Policy{Budget: retry.Unlimited(), Rand: func() uint64 { return 1 << 63 }},
		Criticality: levee.Critical,
		Margin:      outbound.DefaultMargin,
		Now:         func() time.Time { return now },
		Sleep: func(_ context.Context, d time.Duration) error {
			fmt.Println("wait", d)
			now = now.Add(d)
			return nil
		},
	}
	err := c.Run(context.Background(), func(a outbound.Attempt) error {
		fmt.Printf("attempt %d\n", a.N)
		if a.N == 0 {
			return &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 200 * time.Millisecond}
		}
		a.Release()
		return nil
	})
	fmt.Println(err)
	// Output:
	// attempt 0
	// wait 250ms
	// attempt 1
	// <nil>
}
