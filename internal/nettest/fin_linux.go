//go:build linux

package nettest

import (
	"net"

	"golang.org/x/sys/unix"
)

// finAcked reports whether c's FIN was acknowledged (TCP_FIN_WAIT2 or
// later), reading the state with getsockopt(TCP_INFO).
func finAcked(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return true
	}
	var state uint8
	ok := false
	_ = rc.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			state, ok = info.State, true
		}
	})
	// include/net/tcp_states.h: before the peer acknowledges the FIN the
	// socket is ESTABLISHED (not yet sent) or FIN_WAIT1.
	const established, finWait1 = 1, 4
	return !ok || state != established && state != finWait1
}
