//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package pressure

import (
	"syscall"
	"time"
)

// ProcessCPU returns the cumulative user + system CPU time of every thread
// of this process (getrusage RUSAGE_SELF), the default reader of NewCPU.
// It is one system call; safe for concurrent use.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
