package throttle

import (
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/internal/epoch"
)

// coarse is the real-time clock behind Allow and Accept. Reading the system
// clock costs more than the rest of a decision (about 40 ns for time.Now
// and 25 ns for the monotonic reading alone on the reference VMs), so a
// goroutine refreshes an atomic timestamp every clockPeriod while the clock
// is in use and exits after idleStop without readers; the next reader reads
// the system clock once and starts it again. Readers never block.
// Staleness is about one period, small against the 100 ms fold tick.
type coarse struct {
	us      atomic.Int64
	running atomic.Bool
	used    atomic.Bool
}

const (
	clockPeriod = 2 * time.Millisecond
	idleStop    = time.Second
)

// wall is shared by every Throttle: one goroutine at most, only while some
// Throttle is used on real time.
var wall coarse

func (c *coarse) now() int64 {
	if c.running.Load() {
		if !c.used.Load() {
			c.used.Store(true)
		}
		return c.us.Load()
	}
	us := epoch.Micros(time.Now())
	c.us.Store(us)
	c.used.Store(true)
	if c.running.CompareAndSwap(false, true) {
		go c.run()
	}
	return us
}

func (c *coarse) run() {
	tk := time.NewTicker(clockPeriod)
	defer tk.Stop()
	idle := 0
	for range tk.C {
		c.us.Store(epoch.Micros(time.Now()))
		if c.used.Swap(false) {
			idle = 0
			continue
		}
		if idle++; time.Duration(idle)*clockPeriod >= idleStop {
			c.running.Store(false)
			return
		}
	}
}
