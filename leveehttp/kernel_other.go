//go:build !linux

package leveehttp

import "net"

// peekAccepted knows nothing outside Linux: no kernel state is read.
func peekAccepted(net.Conn) accepted { return accepted{} }

// kernelViewed reports that peekAccepted asks the kernel on this system.
const kernelViewed = false

// acceptQueue knows nothing outside Linux.
func acceptQueue(net.Listener) (int, bool) { return 0, false }
