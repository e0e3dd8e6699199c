package admit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// cpu stands in for pressure.NewCPU: utilisation of a server that can do
// 1250 requests per second, measured over the last period.
type cpu struct{ v float64 }

func (c *cpu) Name() string    { return "cpu" }
func (c *cpu) Value() float64  { return c.v }
func (c *cpu) Target() float64 { return 0.8 } // so capacity at target is 1000/s

func Example() {
	sig := &cpu{}
	ctl := admit.New(admit.WithSignals(sig))
	// A server calls ctl.Admit per request and runs ctl.Run(ctx) in a
	// goroutine; here the same code runs on virtual time.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const period = 50 * time.Millisecond
	var admitted [levee.NumCriticalities]int

	for i := range 200 { // 10 s at 1600 requests/s: 800 SHEDDABLE, 800 CRITICAL
		n := 0
		for range 40 {
			for _, c := range []levee.Criticality{levee.Sheddable, levee.Critical} {
				ctx := levee.WithCall(context.Background(), levee.Call{Criticality: c})
				t, err := ctl.AdmitAt(ctx, now)
				if err != nil {
					continue // a 503 with err's RetryAfter and NoRetry
				}
				n++
				if i >= 100 {
					admitted[c]++
				}
				t.DoneAt(now, nil)
			}
		}
		sig.v = float64(n) / (1250 * period.Seconds())
		now = now.Add(period)
		ctl.Step(now)
	}
	s := ctl.Snapshot()
	fmt.Printf("CRITICAL admitted:  %.0f%%\n", float64(admitted[levee.Critical])/40)
	fmt.Printf("SHEDDABLE admitted: %.0f%%\n", float64(admitted[levee.Sheddable])/40)
	fmt.Printf("overloaded=%v degrade level %d, %d levels fully shed\n", s.Overloaded, s.DegradeLevel, int(s.ShedLevel))
	// Output:
	// CRITICAL admitted:  100%
	// SHEDDABLE admitted: 25%
	// overloaded=true degrade level 3, 0 levels fully shed
}
