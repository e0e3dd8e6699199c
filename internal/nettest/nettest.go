// Package nettest holds helpers for tests that need a TCP connection in a
// known kernel state on loopback.
package nettest

import (
	"net"
	"testing"
	"time"
)

// QueueGone dials addr, sends data and closes the connection, returning
// once the listening side's kernel has its end of stream (on Linux: the
// client reads FIN_WAIT2, so the server's socket is in CLOSE_WAIT, still
// waiting in the accept queue if nobody accepted it). Elsewhere it returns
// after the close. The wait is bounded (5 s), so a test never hangs on it.
func QueueGone(tb testing.TB, addr, data string) {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	tc := c.(*net.TCPConn)
	if data != "" {
		if _, err := tc.Write([]byte(data)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tc.CloseWrite(); err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !finAcked(tc) {
		if time.Now().After(deadline) {
			tb.Fatal("nettest: the peer's kernel did not acknowledge the end of stream within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
