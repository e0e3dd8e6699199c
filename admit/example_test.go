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

// A drill: force shed level 1.5 for a minute, whatever the signals say.
// Every SHEDDABLE request and half of the SHEDDABLE_PLUS ones are
// rejected; CRITICAL and CRITICAL_PLUS are served.
func ExampleController_ForceShed() {
	ctl := admit.New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctl.Step(now)
	ctl.ForceShed(1.5, now.Add(time.Minute)) // in force for the next Admit

	for _, c := range levee.Criticalities() {
		ctx := levee.WithCall(context.Background(), levee.Call{Criticality: c})
		served := 0
		for range 100 {
			if t, err := ctl.AdmitAt(ctx, now); err == nil {
				served++
				t.DoneAt(now, nil)
			}
		}
		fmt.Printf("%-14s %3d%% served\n", c, served)
	}
	level, until, _ := ctl.ForcedShed(now)
	fmt.Println("forced", level, "for", until.Sub(now))
	// Output:
	// SHEDDABLE        0% served
	// SHEDDABLE_PLUS  50% served
	// CRITICAL       100% served
	// CRITICAL_PLUS  100% served
	// forced 1.5 for 1m0s
}

// A drill and an overload manager each hold a floor of their own: the
// manager's renewal every period does not end the drill, and the higher
// floor is in force.
func ExampleController_OverloadShed() {
	ctl := admit.New()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctl.Step(now)
	ctl.ForceShed(1, now.Add(time.Minute)) // a drill: SHEDDABLE
	for range 10 {                         // the manager's steps: SHEDDABLE_PLUS too
		now = now.Add(admit.DefaultPeriod)
		ctl.OverloadShed(2, now.Add(3*admit.DefaultPeriod))
		ctl.Step(now)
	}
	s := ctl.Snapshot()
	fmt.Println("drill", s.ForcedShed, "manager", s.OverloadShed, "shed level", s.ShedLevel)
	for range 10 { // the manager stopped: its floor expires, the drill stays
		now = now.Add(admit.DefaultPeriod)
		ctl.Step(now)
	}
	s = ctl.Snapshot()
	fmt.Println("drill", s.ForcedShed, "manager", s.OverloadShed, "shed level", s.ShedLevel)
	// Output:
	// drill 1 manager 2 shed level 2
	// drill 1 manager 0 shed level 1
}

// Dry-run: requests that would be rejected are admitted and counted.
func ExampleController_SetDryRun() {
	ctl := admit.New(admit.WithQuota("batch", admit.Quota{Rate: 1, Burst: 2}))
	ctl.SetDryRun(true)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := levee.WithCall(context.Background(), levee.Call{Tenant: "batch"})
	for range 5 {
		if t, err := ctl.AdmitAt(ctx, now); err == nil {
			t.DoneAt(now, nil)
		}
	}
	s := ctl.Snapshot()
	fmt.Println("admitted", s.Admitted[levee.Critical], "would reject (quota)", s.WouldReject[levee.Critical][levee.Quota],
		"rejected", s.Rejected[levee.Critical][levee.Quota])
	// Output:
	// admitted 5 would reject (quota) 3 rejected 0
}
