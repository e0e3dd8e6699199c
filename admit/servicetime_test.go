package admit_test

import (
	"context"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// budgetPhase offers rate requests a second for dur from start, each with
// budget left and taking work to serve, and returns how many were
// admitted of how many.
func budgetPhase(ctl *admit.Controller, start time.Time, dur time.Duration, rate float64, budget, work time.Duration) (admitted, n int) {
	iv := time.Duration(float64(time.Second) / rate)
	for at := start; at.Before(start.Add(dur)); at = at.Add(iv) {
		ctx, cancel := context.WithDeadline(context.Background(), at.Add(budget))
		tk, err := ctl.AdmitAt(ctx, at)
		n++
		if err == nil {
			admitted++
			tk.DoneAt(at.Add(work), nil)
		}
		cancel()
	}
	return admitted, n
}

// TestLongPollLockoutHeals: 3,000 legitimate 3 s long-polls on a server
// without WithRoute (every request shares one learned time) used to teach
// it a service time of 3 s that nothing unlearned: every later request
// with a 1 s budget was refused as "cannot meet", still 10 s later. Now
// the lockout heals: refused requests are probed, and their 1 ms times
// bring the estimate down within a second.
func TestLongPollLockoutHeals(t *testing.T) {
	ctl := admit.New()
	start := time.Now() // deadlines are real contexts: stay near the real time
	for i := range 3000 {
		at := start.Add(time.Duration(i) * time.Millisecond)
		tk, err := ctl.AdmitAt(context.Background(), at)
		if err != nil {
			t.Fatal(err)
		}
		tk.DoneAt(at.Add(3*time.Second), nil)
	}
	after := start.Add(6 * time.Second)
	adm0, n0 := budgetPhase(ctl, after, time.Second, 200, time.Second, time.Millisecond)
	adm1, n1 := budgetPhase(ctl, after.Add(time.Second), 9*time.Second, 200, time.Second, time.Millisecond)
	t.Logf("1 s budgets after the long-polls: %d/%d admitted in the first second, %d/%d in the 9 s after", adm0, n0, adm1, n1)
	if adm1 < n1*99/100 {
		t.Errorf("1 s budgets, 1–10 s after the long-polls: %d of %d admitted, want ≥ 99%%", adm1, n1)
	}
}

// TestSlowUploadNotServiceTime: 3,200 POSTs whose bodies trickle in over
// 4 s, then 1 ms of work. The adapter marks the start of service once the
// body is read (Ticket.StartAt): the route learns 1 ms, not 4 s, and
// later 1 s budgets are admitted.
func TestSlowUploadNotServiceTime(t *testing.T) {
	for _, tc := range []struct {
		name      string
		mark      bool
		wantAbove float64 // admitted share of later 1 s budgets in their first second
	}{
		{"start marked after the upload", true, 0.99},
		{"upload counted (no Start)", false, 0},
	} {
		ctl := admit.New()
		start := time.Now()
		for i := range 3200 {
			at := start.Add(time.Duration(i) * time.Millisecond)
			tk, _ := ctl.AdmitAt(context.Background(), at)
			if tc.mark {
				tk.StartAt(at.Add(4 * time.Second))
			}
			tk.DoneAt(at.Add(4*time.Second+time.Millisecond), nil)
		}
		adm, n := budgetPhase(ctl, start.Add(8*time.Second), time.Second, 200, time.Second, time.Millisecond)
		share := float64(adm) / float64(n)
		t.Logf("%s: %d/%d 1 s budgets admitted in the first second", tc.name, adm, n)
		if tc.mark && share < tc.wantAbove {
			t.Errorf("%s: %.3f of 1 s budgets admitted, want ≥ %v", tc.name, share, tc.wantAbove)
		}
		if !tc.mark && share > 0.5 {
			t.Errorf("%s: %.3f admitted: the 4 s uploads should have been learned (the case shows Start matters)", tc.name, share)
		}
	}
}

// TestExcludedTicketsTeachNothing: a stream's ticket marked Exclude does
// not teach its route a service time.
func TestExcludedTicketsTeachNothing(t *testing.T) {
	ctl := admit.New()
	start := time.Now()
	for i := range 3200 {
		at := start.Add(time.Duration(i) * time.Millisecond)
		tk, _ := ctl.AdmitAt(context.Background(), at)
		tk.Exclude()
		tk.DoneAt(at.Add(time.Minute), nil)
	}
	adm, n := budgetPhase(ctl, start.Add(4*time.Second), time.Second, 200, time.Second, time.Millisecond)
	if adm != n {
		t.Errorf("after excluded one-minute streams: %d of %d 1 s budgets admitted, want all", adm, n)
	}
}
