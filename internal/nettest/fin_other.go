//go:build !linux

package nettest

import "net"

// finAcked cannot read the state outside Linux: the close is taken as
// enough.
func finAcked(*net.TCPConn) bool { return true }
