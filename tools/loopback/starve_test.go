//go:build realtime

package loopback

import (
	"context"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
)

// TestTimerStarvation shows why a control loop driven only by a ticker
// goroutine is fragile in a saturated GOMAXPROCS=1 Go server: an
// unprotected backend with 20ms CPU-bound handlers, offered 4× its
// capacity by naive clients, runs its 50ms ticker's goroutine late by
// seconds (Report.MaxStall), although the process keeps running handlers.
// Report.RunDelay says how much of it the machine's other work explains.
// It only logs; run it with
//
//	go test -tags realtime -run TestTimerStarvation -v ./tools/loopback/
func TestTimerStarvation(t *testing.T) {
	ctx := context.Background()
	work := 20 * time.Millisecond
	capRPS := float64(time.Second) / float64(work) // nominal, one CPU
	res, err := Run(ctx, Config{
		Name: "starve", Protection: backend.None, Client: Naive, Work: work,
		Timeout: time.Second, Retries: 0,
		Phases: []load.Phase{{Name: "4x", Rate: 4 * capRPS, Duration: 15 * time.Second}},
		Drain:  time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Server
	t.Logf("backend used %.1fs of CPU, its threads waited %.1fs for one; ticker goroutine late for %.1fs in all, longest gap %v; handler runs after their client's deadline %.0f%%",
		s.CPU.Seconds(), s.RunDelay.Seconds(), s.Stalled.Seconds(), s.MaxStall.Round(time.Millisecond), 100*s.WastedWorkShare())
}
