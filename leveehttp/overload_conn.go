package leveehttp

import (
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Listener wraps ln for the Overload's connection actions (see
// Overload): the Timeouts action's short idle and header timeouts, and
// the idle connections closed when Accept runs out of descriptors. Wrap
// it inside leveehttp.Listener, and give the server ConnState:
//
//	srv.ConnState = o.ConnState
//	srv.Serve(leveehttp.Listener(o.Listener(ln)))
//
// Without ConnState a connection is never seen idle or active, and its
// timeouts are the server's.
func (o *Overload) Listener(ln net.Listener) net.Listener {
	return &overloadListener{Listener: ln, o: o}
}

type overloadListener struct {
	net.Listener
	o *Overload
}

func (l *overloadListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	// Out of descriptors: close the connections that hold one for
	// nothing and try again at once, before net/http backs off (up to a
	// second, while a health probe waits in the backlog).
	for try := 0; err != nil && isOutOfDescriptors(err) && try < 2 && l.o.outOfDescriptors(); try++ {
		c, err = l.Listener.Accept()
	}
	if err != nil {
		return c, err
	}
	oc := &overloadConn{Conn: c, o: l.o}
	oc.phase.Store(phaseIdle)
	oc.since.Store(l.o.cfg.now().UnixNano())
	l.o.mu.Lock()
	l.o.conns[oc] = struct{}{}
	l.o.mu.Unlock()
	return oc, nil
}

// A connection's phases, as the Timeouts action sees them.
const (
	phaseIdle   int32 = iota // waiting for a request's first byte (new, or between requests)
	phaseHead                // reading a request's head
	phaseActive              // a request is being served (or the connection is HTTP/2, hijacked)
)

// overloadConn is a connection of Overload.Listener. It keeps the read
// deadline the server asked for and applies the earlier of it and the
// Timeouts action's deadline for the phase it is in.
type overloadConn struct {
	net.Conn
	o      *Overload
	phase  atomic.Int32
	since  atomic.Int64 // when the phase began, Unix ns
	closed atomic.Bool

	mu     sync.Mutex // orders the deadlines applied to Conn
	server time.Time  // the read deadline the server asked for
}

func (c *overloadConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.phase.Load() == phaseIdle && c.phase.CompareAndSwap(phaseIdle, phaseHead) {
		c.since.Store(c.o.cfg.now().UnixNano())
		c.apply()
	}
	return n, err
}

// SetReadDeadline records the server's deadline and applies it, or the
// Timeouts action's if earlier.
func (c *overloadConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.server = t
	return c.Conn.SetReadDeadline(c.deadlineLocked())
}

// SetDeadline sets both deadlines, the read one as SetReadDeadline does.
func (c *overloadConn) SetDeadline(t time.Time) error {
	if err := c.Conn.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

// apply re-applies the read deadline after a change of phase or of the
// Timeouts action.
func (c *overloadConn) apply() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.Conn.SetReadDeadline(c.deadlineLocked())
}

// deadlineLocked returns the read deadline in force: the server's, or the
// Timeouts action's for the phase if earlier.
func (c *overloadConn) deadlineLocked() time.Time {
	ph := c.phase.Load()
	if ph == phaseActive {
		return c.server
	}
	idle, header, ok := c.o.shortTimeouts(c.o.cfg.now())
	if !ok {
		return c.server
	}
	d := idle
	if ph == phaseHead {
		d = header
	}
	short := time.Unix(0, c.since.Load()).Add(d)
	if c.server.IsZero() || short.Before(c.server) {
		return short
	}
	return c.server
}

func (c *overloadConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.o.mu.Lock()
		delete(c.o.conns, c)
		c.o.mu.Unlock()
	}
	return c.Conn.Close()
}

// ReadFrom lets net/http's sendfile path reach the wrapped connection.
func (c *overloadConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }

// NetConn returns the wrapped connection.
func (c *overloadConn) NetConn() net.Conn { return c.Conn }

// ConnState is an http.Server ConnState function that tells the
// connections of Listener when they are idle (between requests) and
// active (serving one); chain it with the server's own, if any. Other
// connections are left alone.
func (o *Overload) ConnState(nc net.Conn, s http.ConnState) {
	c := overloadConnOf(nc)
	if c == nil || c.o != o {
		return
	}
	switch s {
	case http.StateIdle:
		c.since.Store(o.cfg.now().UnixNano())
		c.phase.Store(phaseIdle)
		c.apply()
	case http.StateActive:
		c.phase.Store(phaseActive)
		c.apply()
	case http.StateHijacked, http.StateClosed:
		c.phase.Store(phaseActive)
		if c.closed.CompareAndSwap(false, true) {
			o.mu.Lock()
			delete(o.conns, c)
			o.mu.Unlock()
		}
	}
}

// overloadConnOf finds the overloadConn under nc's wrappers (a TLS
// connection, leveehttp.Listener's), nil when there is none.
func overloadConnOf(nc net.Conn) *overloadConn {
	for range 8 {
		switch c := nc.(type) {
		case *overloadConn:
			return c
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}
