package soak

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/levee-dev/levee/tools/loopback"
)

// pinAway pins every thread of this process to the generator's CPU, away
// from the backend child's (loopback.Place), and returns the function
// that gives the threads back the CPUs they had. With a single CPU it
// does nothing.
func pinAway() (restore func(), err error) {
	cpu := loopback.Place().Loadgen
	var was unix.CPUSet
	if cpu < 0 || unix.SchedGetaffinity(0, &was) != nil {
		return func() {}, nil
	}
	if err := loopback.PinSelf(cpu); err != nil {
		return nil, err
	}
	return func() {
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, t := range tasks {
			if tid, err := strconv.Atoi(t.Name()); err == nil {
				_ = unix.SchedSetaffinity(tid, &was)
			}
		}
	}, nil
}
