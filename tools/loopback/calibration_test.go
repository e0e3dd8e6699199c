package loopback

import (
	"context"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
)

// TestCalibrationKept: the first Spin count kept for a cost stays; a
// zero count is not kept; costs are kept apart.
func TestCalibrationKept(t *testing.T) {
	c := calibrations{byCost: map[time.Duration]int{}}
	if got := c.get(time.Millisecond); got != 0 {
		t.Fatalf("empty: get = %d, want 0", got)
	}
	c.keep(backend.Work{Cost: time.Millisecond, Iterations: 0})
	c.keep(backend.Work{Cost: time.Millisecond, Iterations: 900})
	c.keep(backend.Work{Cost: time.Millisecond, Iterations: 1200})
	c.keep(backend.Work{Cost: 20 * time.Millisecond, Iterations: 18000})
	if got := c.get(time.Millisecond); got != 900 {
		t.Errorf("1ms: get = %d, want the first count kept, 900", got)
	}
	if got := c.get(20 * time.Millisecond); got != 18000 {
		t.Errorf("20ms: get = %d, want 18000", got)
	}
}

// TestBackendsShareCalibration: two backend children started in turn for
// one cost run the same work, the first one's calibration.
func TestBackendsShareCalibration(t *testing.T) {
	const cost = 1234 * time.Microsecond // no other test of the package uses it
	ctx := context.Background()
	var iters []int
	for range 2 {
		b, err := StartBackend(ctx, backend.None, cost, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		iters = append(iters, b.Work.Iterations)
		if _, err := b.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	if iters[0] <= 0 || iters[1] != iters[0] {
		t.Errorf("Spin counts of two backends for %v: %v, want one positive count twice", cost, iters)
	}
}
