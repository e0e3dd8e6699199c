package loopback

import (
	"context"
	"sync"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

// CPUSample is a process's cumulative CPU time (user + system, seconds)
// read at one moment.
type CPUSample struct {
	At  time.Time `json:"at"`
	CPU float64   `json:"cpu_s"`
}

// CPUTrace is a backend child's CPU time, read from /proc/PID/stat by the
// parent (load.ProcessCPU), so that no code in the backend is needed and a
// backend starved of its CPU is still traced. Safe for concurrent use.
type CPUTrace struct {
	mu      sync.Mutex
	samples []CPUSample
}

// TraceCPU reads pid's CPU time every period until ctx is done or the
// process is gone; the trace is complete once done is closed.
func TraceCPU(ctx context.Context, pid int, period time.Duration) (t *CPUTrace, done <-chan struct{}) {
	t = &CPUTrace{}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		src := &load.ProcessCPU{PID: pid}
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			r, err := src.Read(ctx)
			if err != nil {
				return
			}
			t.add(CPUSample{At: time.Now(), CPU: r.Seconds})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return t, ch
}

func (t *CPUTrace) add(s CPUSample) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.samples = append(t.samples, s)
}

// Samples returns a copy of the samples, oldest first.
func (t *CPUTrace) Samples() []CPUSample {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]CPUSample(nil), t.samples...)
}

// At returns the CPU seconds used by time x, interpolated linearly between
// the samples around it; ok is false outside the trace.
func (t *CPUTrace) At(x time.Time) (cpu float64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.samples
	for i := 1; i < len(s); i++ {
		if x.After(s[i].At) {
			continue
		}
		if x.Before(s[i-1].At) {
			return 0, false
		}
		span := s[i].At.Sub(s[i-1].At).Seconds()
		if span <= 0 {
			return s[i].CPU, true
		}
		f := x.Sub(s[i-1].At).Seconds() / span
		return s[i-1].CPU + f*(s[i].CPU-s[i-1].CPU), true
	}
	return 0, false
}

// Used returns the CPU seconds used in [from, to]; ok is false if the
// trace does not cover both ends.
func (t *CPUTrace) Used(from, to time.Time) (cpu float64, ok bool) {
	a, ok1 := t.At(from)
	b, ok2 := t.At(to)
	return b - a, ok1 && ok2
}
