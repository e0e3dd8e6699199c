package loopback

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPlaceSurvivesPinning: once this process has pinned itself to the
// generator's CPU, Place still puts the next backend on the other one
// (the labs pin themselves and then start backend after backend).
func TestPlaceSurvivesPinning(t *testing.T) {
	before := Place()
	if before.Loadgen < 0 {
		t.Skip("one CPU allowed: nothing to place apart")
	}
	var was unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, tk := range tasks {
			if tid, err := strconv.Atoi(tk.Name()); err == nil {
				_ = unix.SchedSetaffinity(tid, &was)
			}
		}
	})
	if err := PinSelf(before.Loadgen); err != nil {
		t.Fatal(err)
	}
	if got := place(); got.Loadgen >= 0 || got.Backend != before.Loadgen {
		t.Fatalf("the affinity read after pinning is %+v, want only the generator's CPU %d: the test does not pin", got, before.Loadgen)
	}
	if after := Place(); after != before || after.Backend == after.Loadgen {
		t.Errorf("after pinning to the generator's CPU, Place() = %+v, want %+v", after, before)
	}
}

// TestCheapest: the lowest cost of each measurement over the rounds, a
// failed round skipped, a measurement that never succeeds an error.
func TestCheapest(t *testing.T) {
	seq := func(xs ...float64) func() (Cost, error) {
		i := 0
		return func() (Cost, error) {
			x := xs[i%len(xs)]
			i++
			if x < 0 {
				return Cost{}, errors.New("stalled")
			}
			return Cost{Micros: x}, nil
		}
	}
	got, err := Cheapest(3, seq(80, -1, 70), seq(60, 65, 90))
	if err != nil || got[0].Micros != 70 || got[1].Micros != 60 {
		t.Errorf("Cheapest = %+v, %v; want 70 and 60", got, err)
	}
	if _, err := Cheapest(2, seq(-1), seq(5)); err == nil {
		t.Errorf("a measurement that never succeeded gave no error")
	}
}
