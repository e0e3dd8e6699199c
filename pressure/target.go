package pressure

import "time"

// Targets can be changed while the signals run, for a configuration
// reload: the admission controller reads Target once per control period,
// so the next period steers to the new value. Each setter accepts what
// the matching option accepts and returns the option's error, changing
// nothing, otherwise.

// SetTarget changes the CPU target (see WithCPUTarget). Safe for
// concurrent use.
func (c *CPU) SetTarget(f float64) error {
	var cfg cpuConfig
	var ch checker
	WithCPUTarget(f)(&cfg, &ch)
	if err := ch.err(); err != nil {
		return err
	}
	c.target.store(cfg.target)
	return nil
}

// SetTarget changes the scheduler latency target (see WithSchedTarget).
// Safe for concurrent use.
func (s *SchedLatency) SetTarget(d time.Duration) error {
	var cfg schedConfig
	var ch checker
	WithSchedTarget(d)(&cfg, &ch)
	if err := ch.err(); err != nil {
		return err
	}
	s.target.store(cfg.target)
	return nil
}

// SetTarget changes the queueing delay target (see WithQueueTarget). Safe
// for concurrent use.
func (q *QueueDelay) SetTarget(d time.Duration) error {
	var cfg queueConfig
	var ch checker
	WithQueueTarget(d)(&cfg, &ch)
	if err := ch.err(); err != nil {
		return err
	}
	q.target.store(cfg.target)
	return nil
}
