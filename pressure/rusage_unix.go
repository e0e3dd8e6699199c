//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pressure

import (
	"syscall"
	"time"
)

// processCPU returns the user + system CPU time of every thread of this
// process.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
