package leveehttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/internal/inbound"
	"github.com/levee-dev/levee/internal/wire"
)

func defaultUniform() float64 { return inbound.Uniform(nil) }

// Listener wraps ln so that a Handler sees when each request's head (its
// request line and headers) was complete, not only when the handler
// started: under overload a Go server queues requests in the kernel's
// socket buffers and the run queue before any middleware runs, and that
// wait counts against the caller's deadline and feeds WithQueueDelay. Use
// it with ConnContext:
//
//	srv := &http.Server{Handler: h, ConnContext: leveehttp.ConnContext}
//	srv.Serve(leveehttp.Listener(ln))
//
// How it works: the connection watches the bytes read from it for the
// blank line that ends a request head and stamps the time of the read that
// brings it; a later head end replaces the stamp, and the Handler takes it
// when the request reaches it. So:
//
//   - a slow sender gains nothing: a head sent a byte at a time is stamped
//     when its last byte arrives, so its time on the wire is never
//     counted as the server's queueing delay;
//   - a request that does not pass through the Handler (a status page
//     routed around it) leaves no stamp for the next one: the next head's
//     end replaces it;
//   - a request whose head arrived while the previous request on the same
//     connection still ran in the Handler (pipelined, or sent early) is
//     stamped when that previous request ended: the wait behind its own
//     connection is not the server's queue. One connection thus adds at
//     most its requests' real dispatch delays to the signal.
//
// Its limits:
//
//   - HTTP/1 in clear text only: under TLS the connection sees only
//     ciphertext, and HTTP/2 multiplexes streams on one connection; there
//     the Handler uses the time it starts (ConnContext turns the stamps
//     off for TLS connections, the first HTTP/2 request for h2c ones);
//   - after a request with a body the next request on the connection is
//     not stamped (net/http may still be discarding the unread body) and
//     falls back to the handler's start;
//   - a read stamp is taken when the Go runtime gets to read the bytes;
//     only for the bytes that came before the connection was accepted
//     does the kernel say when they came (below). Bytes that wait in an
//     accepted connection's receive queue, behind a busy run queue, are
//     stamped when read (CPU and scheduler-latency signals see that wait).
//
// What the kernel knows at the accept (Linux, one getsockopt(TCP_INFO)
// per connection; elsewhere nothing is asked):
//
//   - a connection its peer closed or reset while it waited in the
//     accept queue is closed unread and Accept goes on to the next one:
//     its caller has gone, as net/http itself concludes when a read meets
//     the peer's end of stream (it cancels the request's context). A
//     client that half-closes its side right after sending a request is
//     taken as gone too. The listener's Gone method counts them
//     (ln.(interface{ Gone() uint64 })); Protect exports the count as
//     levee_connections_gone_total;
//   - a head whose bytes had all come before the accept is stamped when
//     the last of them came (the kernel's clock, in milliseconds), so the
//     wait in the accept queue counts as the server's queueing delay, and
//     against the caller's deadline, like any wait after it.
//
// Each read scans its bytes for line ends while the connection expects a
// head (bytes.IndexByte), and one that ends a head costs one time.Now. The
// peer's default tenant (its network prefix) is also computed once per
// connection.
func Listener(ln net.Listener) net.Listener { return newListener(ln, new(atomic.Uint64)) }

// newListener is Listener counting the connections closed unread in gone.
func newListener(ln net.Listener, gone *atomic.Uint64) *stampListener {
	return &stampListener{Listener: ln, clock: monoNow, peek: peekAccepted, gone: gone}
}

type stampListener struct {
	net.Listener
	clock func() int64            // monoNow; tests replace it
	peek  func(net.Conn) accepted // peekAccepted; tests replace it
	gone  *atomic.Uint64          // connections closed unread (Gone); nil: not counted
}

func (l *stampListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return c, err
		}
		var k accepted
		if l.peek != nil {
			k = l.peek(c)
		}
		if k.gone {
			// Its caller closed it while it waited to be accepted:
			// nobody reads an answer, so none is computed.
			if l.gone != nil {
				l.gone.Add(1)
			}
			_ = c.Close()
			continue
		}
		sc := &stampConn{Conn: c, clock: l.clock}
		if k.queued > 0 {
			sc.early.Store(max(l.clock()-int64(k.age), 1))
			sc.earlyLeft.Store(k.queued)
		}
		if a := inbound.NetAddr(c.RemoteAddr()); a.IsValid() {
			var b [64]byte
			sc.tenant, sc.addr = string(wire.AppendPeerTenant(b[:0], a)), a
		}
		return sc, nil
	}
}

// Gone returns how many connections Accept closed unread because their
// peer had closed them before they were accepted.
func (l *stampListener) Gone() uint64 {
	if l.gone == nil {
		return 0
	}
	return l.gone.Load()
}

// accepted is what the kernel tells of a connection at its accept
// (peekAccepted).
type accepted struct {
	gone   bool          // the peer had closed or reset it
	queued int64         // bytes that came before the accept
	age    time.Duration // since the last of them came
}

// rawConn returns the connection under c's wrappers (NetConn methods).
func rawConn(c net.Conn) net.Conn {
	for range 8 {
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		c = u.NetConn()
	}
	return c
}

// stampConn's st packs the stamp of the latest head end (monoNow units, 0
// for none) above stampBits bits of scanner state (head*, paused or off).
type stampConn struct {
	net.Conn
	st        atomic.Int64
	early     atomic.Int64 // the stamp of the bytes that came before the accept (0: none left)
	earlyLeft atomic.Int64 // how many of them are still unread
	clock     func() int64
	tenant    string     // the peer's default tenant (its network prefix)
	addr      netip.Addr // the peer's address
}

// The scanner's states. A head ends at the first empty line ("\n\n" or
// "\n\r\n") after a non-empty one.
const (
	headStart = iota // before the request line (stray CR and LF skipped)
	headLine         // inside a line
	headLF           // just after "\n"
	headLFCR         // just after "\n\r"
	paused           // a request body is being read: not scanning
	off              // never again: TLS, HTTP/2 or hijacked

	stampBits = 3
	stateMask = 1<<stampBits - 1
)

func (c *stampConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.scan(p[:n], c.earlyStamp(n))
	}
	return n, err
}

// earlyStamp returns, for a read of n bytes, the kernel's arrival stamp
// when all of them had come before the connection was accepted, else 0.
func (c *stampConn) earlyStamp(n int) int64 {
	e := c.early.Load()
	if e == 0 {
		return 0
	}
	if c.earlyLeft.Add(-int64(n)) < 0 {
		c.early.Store(0)
		return 0
	}
	return e
}

// scan advances the head scanner over p and stamps the connection when p
// ends a head: with early when not 0 (p had all come before the accept,
// see Listener), else now. A concurrent take, done or switch-off wins: its
// CAS makes this one fail, which at worst loses a stamp (the handler's
// start is used), never moves one earlier.
func (c *stampConn) scan(p []byte, early int64) {
	v := c.st.Load()
	s := v & stateMask
	if s >= paused {
		return
	}
	next, ended := scanHead(p, s)
	nv := v&^stateMask | next
	if ended {
		at := early
		if at == 0 {
			at = c.clock()
		}
		nv = at<<stampBits | next
	}
	if nv != v {
		c.st.CompareAndSwap(v, nv)
	}
}

// scanHead runs the head scanner from state s over p and returns its next
// state and whether p held the end of a head.
func scanHead(p []byte, s int64) (next int64, ended bool) {
	for i := 0; i < len(p); {
		switch s {
		case headStart:
			if b := p[i]; b != '\r' && b != '\n' {
				s = headLine
			}
			i++
		case headLine:
			j := bytes.IndexByte(p[i:], '\n')
			if j < 0 {
				return s, ended
			}
			i += j + 1
			s = headLF
		default: // headLF, headLFCR
			switch b := p[i]; {
			case b == '\n':
				s, ended = headStart, true
			case b == '\r' && s == headLF:
				s = headLFCR
			default:
				s = headLine
			}
			i++
		}
	}
	return s, ended
}

// take returns the stamp of the request the Handler starts serving (0 when
// none) and sets the connection up for what follows: a request with a body
// pauses the scanner (its body is read next), a bodiless one keeps it
// scanning (the next bytes are the next head), an HTTP/2 one turns it off.
func (c *stampConn) take(body, http1 bool) int64 {
	for {
		v := c.st.Load()
		s := v & stateMask
		if s == off {
			return 0
		}
		var nv int64
		switch {
		case !http1:
			nv = off
		case body:
			nv = paused
		case s == paused:
			nv = headStart
		default:
			nv = s
		}
		if c.st.CompareAndSwap(v, nv) {
			if s == paused || !http1 {
				return 0
			}
			return v >> stampBits
		}
	}
}

// done is called when the Handler is finished with a request: a stamp
// taken meanwhile belongs to the next request, whose head arrived while
// this one ran, and is moved to now.
func (c *stampConn) done() {
	if c == nil {
		return
	}
	v := c.st.Load()
	if v>>stampBits == 0 {
		return
	}
	c.st.CompareAndSwap(v, c.clock()<<stampBits|v&stateMask)
}

// stop turns the stamps off for good.
func (c *stampConn) stop() {
	if c != nil {
		c.st.Store(off)
	}
}

// monoBase anchors stamps to the monotonic clock: a stamp is the time since
// monoBase plus 1 (so that it is never 0), immune to wall-clock jumps.
var monoBase = time.Now()

func monoNow() int64 { return int64(time.Since(monoBase)) + 1 }

func monoTime(v int64) time.Time { return monoBase.Add(time.Duration(v - 1)) }

// ReadFrom lets net/http's sendfile path reach the wrapped connection.
func (c *stampConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

// NetConn returns the wrapped connection.
func (c *stampConn) NetConn() net.Conn { return c.Conn }

type connKey struct{}

// ConnContext is an http.Server ConnContext function that makes the
// connections accepted by Listener visible to Handler. Connections that do
// not come from Listener (directly or under TLS) are left alone; under TLS
// the stamps are off (the connection sees only ciphertext) and the Handler
// uses the time it starts, while the peer's tenant is still read from the
// connection.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	tc, isTLS := c.(*tls.Conn)
	if isTLS {
		c = tc.NetConn()
	}
	if sc, ok := c.(*stampConn); ok {
		if isTLS {
			sc.stop()
		}
		return context.WithValue(ctx, connKey{}, sc)
	}
	return ctx
}

// arrivalOf returns when r's head was complete, or now when unknown, and
// r's connection when it comes from Listener (see Listener).
func arrivalOf(r *http.Request, now time.Time) (time.Time, *stampConn) {
	sc, ok := r.Context().Value(connKey{}).(*stampConn)
	if !ok {
		return now, nil
	}
	v := sc.take(r.ContentLength != 0 || len(r.TransferEncoding) > 0, r.ProtoMajor == 1)
	if v <= 0 {
		return now, sc
	}
	t := monoTime(v)
	if t.After(now) {
		return now, sc
	}
	return t, sc
}

// peerTenant returns the default tenant of r's caller: its network prefix,
// from the connection (Listener) or the Handler's cache, so that the
// common case does not allocate.
func (h *Handler) peerTenant(q request) (string, netip.Addr) {
	r := q.Request
	if sc, ok := r.Context().Value(connKey{}).(*stampConn); ok && sc.tenant != "" {
		return sc.tenant, sc.addr
	}
	a := inbound.Addr(r.RemoteAddr)
	return h.peers.Tenant(a), a
}
