package load

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

// closedBucket is the resolution of Closed's sliding window.
const closedBucket = 100 * time.Millisecond

// Closed measures the peak throughput of a service: workers goroutines each
// send requests back to back through do for d, after a warm-up of warm (not
// counted). It returns the successes per second over the best whole second
// of d (the mean if d is shorter than a second). On a machine shared with
// other work the best second is the closest to what the service can do
// with its CPU to itself. A closed loop finds the throughput of a saturated
// service without building a queue deeper than workers; it is the reference
// the open-loop runs are compared with, not a way to measure latency.
func Closed(ctx context.Context, workers int, warm, d time.Duration, do func(ctx context.Context) Outcome) float64 {
	if workers <= 0 {
		workers = 1
	}
	if d < closedBucket {
		d = closedBucket
	}
	ctx, cancel := context.WithTimeout(ctx, warm+d)
	defer cancel()
	from := time.Now().Add(warm)
	buckets := make([]atomic.Int64, int(d/closedBucket))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				o := do(ctx)
				i := int(time.Since(from) / closedBucket)
				if o == Goodput && i >= 0 && i < len(buckets) {
					buckets[i].Add(1)
				}
			}
		}()
	}
	wg.Wait()
	rates := make([]float64, len(buckets))
	for i := range buckets {
		rates[i] = float64(buckets[i].Load()) / closedBucket.Seconds()
	}
	return report.BestSecond(rates, closedBucket.Seconds())
}
