//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package pressure

import (
	"errors"
	"time"
)

// ProcessCPU returns an error on this platform: it has no getrusage.
func ProcessCPU() (time.Duration, error) {
	return 0, errors.New("pressure: process CPU time is not available on this platform; use WithProcessCPU")
}
