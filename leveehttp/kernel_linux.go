//go:build linux

package leveehttp

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Linux's TCP states that mean the peer has closed or reset the
// connection (include/net/tcp_states.h).
const (
	tcpClose     = 7
	tcpCloseWait = 8
	tcpListen    = 10
)

// peekAccepted reads what the kernel knows of a connection just accepted
// (one getsockopt(TCP_INFO)): whether its peer has already closed it, and,
// when bytes came before the accept, how many and how long ago the last of
// them arrived. It knows nothing (the zero value) for a connection that is
// not a TCP socket or when the call fails.
func peekAccepted(c net.Conn) (k accepted) {
	info := tcpInfo(rawConn(c))
	if info == nil {
		return k
	}
	k.gone = info.State == tcpCloseWait || info.State == tcpClose
	if info.Bytes_received > 0 {
		k.queued = int64(min(info.Bytes_received, 1<<62))
		k.age = time.Duration(info.Last_data_recv) * time.Millisecond
	}
	return k
}

// tcpInfo asks the kernel for x's TCP_INFO (one getsockopt), nil when x
// is not a socket the runtime exposes (syscall.Conn) or the call fails.
func tcpInfo(x any) *unix.TCPInfo {
	sc, ok := x.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return nil
	}
	return info
}

// kernelViewed reports that peekAccepted asks the kernel on this system.
const kernelViewed = true

// acceptQueue returns how many connections wait in ln's accept queue (a
// listening socket's TCP_INFO says so in its unacked count); ok is false
// when ln is not a TCP listener or the call fails (a closed listener).
func acceptQueue(ln net.Listener) (n int, ok bool) {
	info := tcpInfo(ln)
	if info == nil || info.State != tcpListen {
		return 0, false
	}
	return int(info.Unacked), true
}
