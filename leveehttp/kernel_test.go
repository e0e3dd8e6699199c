package leveehttp

import (
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/internal/nettest"
)

// oneListener hands out the connections it is given, then io.EOF.
type oneListener struct {
	net.Listener
	conns []net.Conn
}

func (l *oneListener) Accept() (net.Conn, error) {
	if len(l.conns) == 0 {
		return nil, io.EOF
	}
	c := l.conns[0]
	l.conns = l.conns[1:]
	return c, nil
}

// closeCount is a connection that counts its Close calls.
type closeCount struct {
	chunkConn
	closed int
}

func (c *closeCount) Close() error         { c.closed++; return nil }
func (c *closeCount) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1} }

// TestAcceptEarlyBytes checks, with a kernel that the test plays, how the
// accept's view of each connection stamps its requests: a connection whose
// peer has gone is closed unread and the next one is returned; a head that
// had all come before the accept is stamped when its last byte came; a
// head whose end came after the accept, and the heads after the early
// bytes, are stamped when read.
func TestAcceptEarlyBytes(t *testing.T) {
	const head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n" // 27 bytes
	tick := int64(1000)
	gone := &closeCount{}
	early := &closeCount{}
	views := map[net.Conn]accepted{
		gone:  {gone: true, queued: int64(len(head)), age: 300},
		early: {queued: int64(len(head)) + 5, age: 400},
	}
	l := &stampListener{
		Listener: &oneListener{conns: []net.Conn{gone, early}},
		clock:    func() int64 { return tick },
		peek:     func(c net.Conn) accepted { return views[c] },
		gone:     new(atomic.Uint64),
	}
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	sc := c.(*stampConn)
	if sc.Conn != early || gone.closed != 1 || early.closed != 0 || l.Gone() != 1 {
		t.Fatalf("accept returned %p (want the live one), closed gone %d and live %d times, Gone %d; want 1, 0, 1",
			sc.Conn, gone.closed, early.closed, l.Gone())
	}
	if _, err := l.Accept(); err != io.EOF {
		t.Fatalf("second accept: %v, want io.EOF", err)
	}

	read := func(at int64, data string) {
		tick, early.next = at, data
		if n, _ := sc.Read(make([]byte, len(data))); n != len(data) {
			t.Fatalf("read %d of %d bytes", n, len(data))
		}
	}
	read(1100, head) // all of it came before the accept, the last byte 400 ticks before it
	if got := sc.take(false, true); got != 600 {
		t.Errorf("early head stamped %d, want 600 (accept at 1000 less 400)", got)
	}
	sc.done()
	read(1200, "GET /b") // 5 early bytes and one that came after the accept
	read(1300, " HTTP/1.1\r\n\r\n")
	if got := sc.take(false, true); got != 1300 {
		t.Errorf("head partly after the accept stamped %d, want 1300 (its read)", got)
	}
	sc.done()
	read(1400, head)
	if got := sc.take(false, true); got != 1400 {
		t.Errorf("later head stamped %d, want 1400 (its read)", got)
	}
}

// TestAcceptPeerGone runs the kernel's view on loopback: a connection its
// peer closed before the accept is closed unread, and Accept returns the
// next one; a request that waited in the kernel is stamped at least as
// early as it waited.
func TestAcceptPeerGone(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	l := Listener(raw).(*stampListener)
	const head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	nettest.QueueGone(t, raw.Addr().String(), head)
	live, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if _, err := live.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	const waited = 100 * time.Millisecond
	time.Sleep(waited)
	before := monoNow()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !kernelViewed {
		if l.Gone() != 0 {
			t.Fatalf("Gone %d without a kernel view", l.Gone())
		}
		t.Skip("no kernel view of accepted connections on this system")
	}
	if l.Gone() != 1 || c.LocalAddr().String() != raw.Addr().String() || c.RemoteAddr().String() != live.LocalAddr().String() {
		t.Fatalf("Gone %d, accepted %v; want 1 and the live connection %v", l.Gone(), c.RemoteAddr(), live.LocalAddr())
	}
	if _, err := c.Read(make([]byte, len(head))); err != nil {
		t.Fatal(err)
	}
	sc := c.(*stampConn)
	// The kernel counts in jiffies (up to 10 ms each): half the wait is
	// a margin no tick can eat.
	if got, want := sc.take(false, true), before-int64(waited/2); got == 0 || got > want {
		t.Errorf("head stamped %v before the accept, want ≥ %v (it waited %v in the kernel)",
			time.Duration(before-got), waited/2, waited)
	}
}

// BenchmarkPeekAccepted measures what the kernel's view costs a
// connection at its accept: one getsockopt(TCP_INFO) on a loopback TCP
// connection.
func BenchmarkPeekAccepted(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		if peekAccepted(c).gone {
			b.Fatal("a live connection read as gone")
		}
	}
}

// TestProtectCountsGone: the connections Protect's listeners close unread
// are exported as levee_connections_gone_total.
func TestProtectCountsGone(t *testing.T) {
	if !kernelViewed {
		t.Skip("no kernel view of accepted connections on this system")
	}
	p, err := Protect(t.Context(), http.NotFoundHandler(), WithLogger(quiet), WithConfig(config.Default(), config.WithEnv(nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	nettest.QueueGone(t, raw.Addr().String(), "")
	live, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	c, err := p.listener(raw).Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	want := `
# HELP levee_connections_gone_total Connections closed unread at accept: their peer had closed them while they waited in the accept queue.
# TYPE levee_connections_gone_total counter
levee_connections_gone_total 1
`
	if err := testutil.GatherAndCompare(p.Registry(), strings.NewReader(want), "levee_connections_gone_total"); err != nil {
		t.Error(err)
	}
}
