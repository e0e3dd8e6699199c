package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Closed measures the peak throughput of a service: workers goroutines each
// send requests back to back through do for d, after a warm-up of warm (not
// counted), and Closed returns the successes per second. A closed loop
// finds the throughput of a saturated service without building a queue
// deeper than workers; it is the reference the open-loop runs are compared
// with, not a way to measure latency.
func Closed(ctx context.Context, workers int, warm, d time.Duration, do func(ctx context.Context) Outcome) float64 {
	if workers <= 0 {
		workers = 1
	}
	ctx, cancel := context.WithTimeout(ctx, warm+d)
	defer cancel()
	t0 := time.Now()
	from, to := t0.Add(warm), t0.Add(warm+d)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				o := do(ctx)
				if now := time.Now(); o == Goodput && now.After(from) && now.Before(to) {
					ok.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds()
}
