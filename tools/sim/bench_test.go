package sim

import (
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSimThroughput runs the avalanche scenario's runs one after the
// other and reports simulated requests (attempts sent to a load balancer,
// retries included) per CPU-second of the benchmark process (user +
// system time of every thread, garbage collection included).
func BenchmarkSimThroughput(b *testing.B) {
	data, _ := BuiltIn("avalanche")
	s, err := Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	for _, run := range s.Runs {
		b.Run(run.Name, func(b *testing.B) {
			var reqs int64
			c0 := cpuTime()
			for i := 0; i < b.N; i++ {
				w := newWorld(s, run, uint64(i))
				w.loop()
				reqs += w.requests
			}
			cpu := cpuTime() - c0
			b.ReportMetric(float64(reqs)/cpu.Seconds(), "req/cpu-s")
			b.ReportMetric(float64(reqs)/float64(b.N), "req/op")
		})
	}
}
