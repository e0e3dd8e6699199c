package throttle_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/throttle"
)

// A client offering 1000 requests/s to a backend that accepts 100/s: it
// soon refuses most requests itself, without touching the network, and the
// backend receives about K = 2 times what it accepts.
func Example() {
	t := throttle.New(throttle.WithSeed(1))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var sent, refused, acceptedThisSecond int
	for i := range 300_000 { // 5 minutes at 1000 requests/s
		now := start.Add(time.Duration(i) * time.Millisecond)
		if i%1000 == 0 {
			acceptedThisSecond = 0
		}
		measured := i >= 120_000 // after the 2-minute window filled
		if err := t.AllowAt(now, levee.Critical); errors.Is(err, levee.ErrThrottled) {
			if measured {
				refused++
			}
			continue
		}
		if measured {
			sent++
		}
		accepted := acceptedThisSecond < 100 // beyond 100/s the backend answers "overloaded"
		if accepted {
			acceptedThisSecond++
		}
		t.DoneAt(now, levee.Critical, accepted)
	}
	fmt.Printf("refused locally: %.0f%%, backend received %.1f×A\n", 100*float64(refused)/180_000, float64(sent)/18_000)
	// Output: refused locally: 80%, backend received 2.0×A
}

func ExampleFormula() {
	for _, k := range []float64{2, 1.1} {
		s := throttle.Formula(k, 10)
		fmt.Printf("K=%.1f at 10×: backend receives %.1f×A, client rejects %.0f%%, backend rejects %.0f%%\n",
			k, s.Received, 100*s.LocalReject, 100*s.BackendReject)
	}
	// Output:
	// K=2.0 at 10×: backend receives 2.0×A, client rejects 80%, backend rejects 50%
	// K=1.1 at 10×: backend receives 1.1×A, client rejects 89%, backend rejects 9%
}

func ExampleSimulate() {
	s := throttle.Simulate(throttle.Scenario{K: 2, Load: 10, Capacity: 100})
	fmt.Printf("backend receives %.2f×A, client rejects %.2f\n", s.Received, s.LocalReject)
	// Output: backend receives 2.00×A, client rejects 0.80
}

func ExampleGroup() {
	g := throttle.NewGroup(throttle.WithK(2), throttle.WithMaxKeys(256))
	t := g.Get("payments.internal:443")
	if err := t.Allow(levee.SheddablePlus); err != nil {
		fmt.Println(err) // do not send; do not retry
		return
	}
	// ... send, then report the outcome: accepted unless the backend
	// answered "overloaded" or "quota".
	t.Done(levee.SheddablePlus, true)
	fmt.Println(g.Len())
	// Output: 1
}
