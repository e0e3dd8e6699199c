package throttle

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestCoarseClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c coarse
		a := c.now()
		if !c.running.Load() {
			t.Fatal("clock not running after the first read")
		}
		time.Sleep(20 * time.Millisecond)
		b := c.now()
		if d := time.Duration(b-a) * time.Microsecond; d < 20*time.Millisecond-clockPeriod || d > 20*time.Millisecond {
			t.Errorf("coarse clock advanced %v over 20ms, want within one period (%v)", d, clockPeriod)
		}
		time.Sleep(idleStop + 10*clockPeriod)
		synctest.Wait()
		if c.running.Load() {
			t.Errorf("clock still running after %v without readers", idleStop)
		}
		c.now() // restarts
		if !c.running.Load() {
			t.Errorf("clock not restarted by a read")
		}
		time.Sleep(idleStop + 10*clockPeriod)
	})
}
