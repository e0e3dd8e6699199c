package pressure

import (
	"time"

	"github.com/levee-dev/levee/internal/option"
)

// Targets can be changed while the signals run, for a configuration
// reload: the admission controller reads Target once per control period,
// so the next period steers to the new value. Each setter accepts the range
// of its option (without the option's "0 means the default": a target is
// set, not defaulted) and otherwise returns an *option.Error-style error
// and changes nothing.

// SetTarget changes the CPU target (see WithCPUTarget): f in (0, 2]. Safe
// for concurrent use.
func (c *CPU) SetTarget(f float64) error {
	if !(f > 0 && f <= 2) {
		return option.New("pressure", "CPU.SetTarget", "must be in (0, 2]", f)
	}
	c.target.store(f)
	return nil
}

// SetTarget changes the scheduler latency target (see WithSchedTarget): d
// in (0, 10s]. Safe for concurrent use.
func (s *SchedLatency) SetTarget(d time.Duration) error {
	if d <= 0 || d > 10*time.Second {
		return option.New("pressure", "SchedLatency.SetTarget", "must be in (0, 10s]", d)
	}
	s.target.store(d.Seconds())
	return nil
}

// SetTarget fixes the queueing delay target (see WithQueueTarget): d in
// (0, 1m]; 0 goes back to the learned target. Safe for concurrent use.
func (q *QueueDelay) SetTarget(d time.Duration) error {
	if d < 0 || d > time.Minute {
		return option.New("pressure", "QueueDelay.SetTarget", "must be in [0, 1m] (0: learned)", d)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fixed.Store(int64(d))
	q.target.store(q.targetFor(q.scale))
	return nil
}

// SetTarget changes the memory target (see WithMemoryTarget): f in (0, 1].
// Safe for concurrent use.
func (m *Memory) SetTarget(f float64) error {
	if !(f > 0 && f <= 1) {
		return option.New("pressure", "Memory.SetTarget", "must be in (0, 1]", f)
	}
	m.target.store(f)
	return nil
}

// SetTarget changes the GC CPU target (see WithGCTarget): f in (0, 1].
// Safe for concurrent use.
func (g *GCCPU) SetTarget(f float64) error {
	if !(f > 0 && f <= 1) {
		return option.New("pressure", "GCCPU.SetTarget", "must be in (0, 1]", f)
	}
	g.target.store(f)
	return nil
}

// SetTarget changes the count's target (see WithCountTarget): f in (0, 1].
// Safe for concurrent use.
func (c *Count) SetTarget(f float64) error {
	if !(f > 0 && f <= 1) {
		return option.New("pressure", "Count.SetTarget", "must be in (0, 1]", f)
	}
	c.target.store(f)
	return nil
}
