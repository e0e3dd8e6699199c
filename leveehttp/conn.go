package leveehttp

import (
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

// Listener wraps ln so that a Handler sees when each request's first bytes
// were read from the connection, not only when the handler started: under
// overload a Go server queues requests in the kernel's socket buffers and
// the run queue before any middleware runs, and that wait counts against
// the caller's deadline and feeds WithQueueDelay. Use it with ConnContext:
//
//	srv := &http.Server{Handler: h, ConnContext: leveehttp.ConnContext}
//	srv.Serve(leveehttp.Listener(ln))
//
// The Handler must see every request on the connection (be the server's
// root handler, or sit under routing that sends everything through it):
// a request that bypasses it leaves its stamp for the next one.
//
// How it works: each connection is "armed" when accepted and after each
// request without a body; the first read that returns data while armed
// stamps the arrival, and the Handler takes the stamp and disarms the
// connection while the request runs. Its limits:
//
//   - HTTP/1 only (HTTP/2 multiplexes streams on one connection; there the
//     Handler uses the time it starts);
//   - the first request's stamp includes a TLS handshake, if any;
//   - after a request with a body the next request on the connection is
//     not stamped (net/http may still be discarding the unread body) and
//     falls back to the handler's start, as does a pipelined request whose
//     bytes were read together with the previous one;
//   - a read stamp is taken when the Go runtime gets to read the bytes, so
//     time spent in the kernel's accept and receive queues before that is
//     still invisible (CPU and scheduler-latency signals see it).
//
// Each read that returns data while armed costs one time.Now. The peer's
// default tenant (its network prefix) is also computed once per connection.
func Listener(ln net.Listener) net.Listener { return &stampListener{ln} }

type stampListener struct{ net.Listener }

func (l *stampListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	sc := &stampConn{Conn: c}
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		var b [64]byte
		sc.tenant = string(wire.AppendPeerTenant(b[:0], ap.Addr()))
	}
	return sc, nil
}

// stampConn's stamp: 0 armed, -1 disarmed (a request is running), > 0 the
// arrival in Unix nanoseconds of the request being read.
type stampConn struct {
	net.Conn
	stamp  atomic.Int64
	tenant string
}

func (c *stampConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.stamp.Load() == 0 {
		c.stamp.CompareAndSwap(0, monoNow())
	}
	return n, err
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
// not come from Listener (directly or under TLS) are left alone.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if sc, ok := c.(*stampConn); ok {
		return context.WithValue(ctx, connKey{}, sc)
	}
	return ctx
}

// arrivalOf returns when r's first bytes were read, or now when unknown. It
// disarms r's connection until the request is finished with (see Listener).
func arrivalOf(r *http.Request, now time.Time) time.Time {
	if r.ProtoMajor != 1 {
		return now
	}
	sc, ok := r.Context().Value(connKey{}).(*stampConn)
	if !ok {
		return now
	}
	v := sc.stamp.Swap(-1)
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		// No body: nothing more of this request will be read, so the next
		// data belongs to the next request.
		sc.stamp.Store(0)
	}
	if v <= 0 {
		return now
	}
	t := monoTime(v)
	if t.After(now) {
		return now
	}
	return t
}

// peerTenant returns the default tenant of r's caller: its network prefix,
// from the connection (Listener) or the Handler's cache, so that the
// common case does not allocate.
func (h *Handler) peerTenant(r *http.Request) string {
	if sc, ok := r.Context().Value(connKey{}).(*stampConn); ok && sc.tenant != "" {
		return sc.tenant
	}
	return h.peers.TenantOf(r.RemoteAddr)
}
