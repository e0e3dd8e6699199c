//go:build probe

// Real-time probes of the signals on this machine. They burn CPU for a few
// seconds and log what the signals read; they assert nothing about absolute
// numbers (the machine is shared). Run with
//
//	go test -tags probe -run Probe -v ./pressure
package pressure

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var sink atomic.Int64

// spin burns about n iterations of CPU.
func spin(n int) {
	x := 0
	for i := range n {
		x += i ^ (x >> 3)
	}
	sink.Add(int64(x))
}

// itersPerMs calibrates spin on one thread.
func itersPerMs() int {
	const n = 5_000_000
	best := time.Hour
	for range 5 {
		start, _ := processCPU()
		spin(n)
		end, _ := processCPU()
		if d := end - start; d > 0 && d < best {
			best = d
		}
	}
	return int(float64(n) / (float64(best) / float64(time.Millisecond)))
}

func median(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs) == 0 {
		return math.NaN()
	}
	return xs[len(xs)/2]
}

// TestProbeCPU: busy goroutines under various GOMAXPROCS; the reading with
// the allowed-core denominator next to what a host-wide denominator
// (runtime.NumCPU) would say.
func TestProbeCPU(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct{ procs, busy int }{{1, 0}, {1, 1}, {1, 4}, {2, 1}, {2, 2}} {
		runtime.GOMAXPROCS(tc.procs)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range tc.busy {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						spin(10000)
					}
				}
			})
		}
		c, err := NewCPU(WithCPUSmoothing(0), WithRunQueueWait(true))
		if err != nil {
			t.Fatal(err)
		}
		var vals, host, waits []float64
		for i := range 21 {
			c.SampleAt(time.Now())
			if i > 0 {
				r := c.Reading()
				vals = append(vals, r.Process)
				waits = append(waits, r.Wait)
				host = append(host, r.Process*r.Cores/float64(runtime.NumCPU()))
			}
			time.Sleep(100 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		r := c.Reading()
		t.Logf("GOMAXPROCS=%d busy=%d: cpu median %.3f of %v cores (%s); host-wide denominator would read %.3f; run-queue wait %.3f cores (WithRunQueueWait reads %.3f)",
			tc.procs, tc.busy, median(vals), r.Cores, r.Bound, median(host), median(waits), median(vals)+median(waits))
	}
	c, _ := NewCPU()
	t.Logf("source: %s", c.Reading().Source)
}

// TestProbeSched: an open-loop GOMAXPROCS=1 server, one goroutine per
// request doing w of CPU work, Poisson arrivals at utilisation u. Logs the
// scheduler latency p99 (median and max of the 100 ms windows) and CPU.
func TestProbeSched(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	runtime.GOMAXPROCS(1)
	ipm := itersPerMs()
	t.Logf("calibration: %d iterations per ms", ipm)
	for _, w := range []time.Duration{time.Millisecond, 20 * time.Millisecond} {
		for _, u := range []float64{0.5, 0.7, 0.9, 1.5} {
			rng := rand.New(rand.NewPCG(1, uint64(u*100)))
			s := NewSchedLatency(WithSchedSmoothing(0))
			c, _ := NewCPU(WithCPUSmoothing(0))
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var inflight atomic.Int64
			wg.Go(func() {
				rate := u / w.Seconds() // arrivals per second
				next := time.Now()
				for {
					next = next.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
					if d := time.Until(next); d > 0 {
						select {
						case <-stop:
							return
						case <-time.After(d):
						}
					}
					select {
					case <-stop:
						return
					default:
					}
					if inflight.Load() > 2000 {
						continue // bounded: shed at the generator
					}
					inflight.Add(1)
					wg.Go(func() {
						defer inflight.Add(-1)
						n := int(w.Seconds() * 1000 * float64(ipm))
						for n > 0 {
							select {
							case <-stop:
								return
							default:
							}
							spin(min(n, ipm/10))
							n -= ipm / 10
						}
					})
				}
			})
			var p99s, cpus []float64
			for i := range 21 {
				now := time.Now()
				s.SampleAt(now)
				c.SampleAt(now)
				if i > 0 {
					p99s = append(p99s, s.Reading().Raw)
					cpus = append(cpus, c.Value())
				}
				time.Sleep(100 * time.Millisecond)
			}
			close(stop)
			wg.Wait()
			t.Logf("work %v, utilisation %.1f: sched p99 median %s max %s; cpu median %.2f",
				w, u, secs(median(p99s)), secs(slices.Max(p99s)), median(cpus))
		}
	}
}

func secs(x float64) string {
	return fmt.Sprint(time.Duration(x * float64(time.Second)).Round(10 * time.Microsecond))
}
