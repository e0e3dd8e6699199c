//go:build linux

package nettest

import (
	"net"
	"syscall"
	"unsafe"
)

// finAcked reports whether c's FIN was acknowledged (TCP_FIN_WAIT2 or
// later), reading the state with getsockopt(TCP_INFO). The call is made
// through the standard library's syscall package: nettest is a leaf of
// levee's core and stays standard-library only.
func finAcked(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return true
	}
	var info syscall.TCPInfo
	ok := false
	_ = rc.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(info))
		_, _, errno := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd,
			syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
		ok = errno == 0
	})
	// include/net/tcp_states.h: before the peer acknowledges the FIN the
	// socket is ESTABLISHED (not yet sent) or FIN_WAIT1.
	const established, finWait1 = 1, 4
	return !ok || info.State != established && info.State != finWait1
}
