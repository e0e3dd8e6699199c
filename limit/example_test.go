package limit_test

import (
	"fmt"
	"time"

	"github.com/levee-dev/levee/limit"
)

// A dependency slows from 10 ms to 40 ms: the limit that had grown while it
// was healthy shrinks within a second.
func ExampleGradient() {
	g := limit.NewGradient(limit.WithMaxLimit(200))
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	step := func(n int, rtt time.Duration) {
		for range n {
			now = now.Add(100 * time.Millisecond)
			g.Update(now, rtt, g.Limit()) // the server keeps the limit in use
		}
	}
	step(200, 10*time.Millisecond)
	fmt.Println("healthy:", g.Limit())
	step(10, 40*time.Millisecond)
	fmt.Println("1 s after the slowdown:", g.Limit())
	// Output:
	// healthy: 200
	// 1 s after the slowdown: 84
}
