package leveehttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/pressure"
)

// vclock is a virtual clock shared by a test's Handler, Listener and
// controller.
type vclock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *vclock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *vclock) add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// mono is the clock of a stampListener on vclock: stamps convert back to
// vclock's times (monoTime).
func (c *vclock) mono() int64 { return int64(c.Now().Sub(monoBase)) + 1 }

// readSignal is a listener whose connections report, on reads, the remote
// address of every read that returned data.
type readSignal struct {
	net.Listener
	reads chan string
}

func (l *readSignal) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return c, err
	}
	return &signalConn{Conn: c, reads: l.reads}, nil
}

type signalConn struct {
	net.Conn
	reads chan string
}

func (c *signalConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.reads <- c.RemoteAddr().String()
	}
	return n, err
}

// maxQueue records the longest delay observed and forwards to a signal.
type maxQueue struct {
	mu   sync.Mutex
	max  time.Duration
	next QueueObserver
}

func (q *maxQueue) Observe(d time.Duration) {
	q.mu.Lock()
	q.max = max(q.max, d)
	q.mu.Unlock()
	q.next.Observe(d)
}

// rawClient is one keep-alive HTTP/1 connection written by hand.
type rawClient struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawClient {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // bounded, whatever happens
	t.Cleanup(func() { c.Close() })
	return &rawClient{c: c, r: bufio.NewReader(c)}
}

func (rc *rawClient) write(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(rc.c, s); err != nil {
		t.Fatal(err)
	}
}

func (rc *rawClient) status(t *testing.T) int {
	t.Helper()
	resp, err := http.ReadResponse(rc.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestSlowSendersDoNotForgeQueueDelay: 30 keep-alive connections that each
// send "G", pause 500 ms, then the rest of a cheap GET (60 requests a
// second in all) must not make an idle server look queued: no delay is
// observed, the queue-delay signal stays at 0 and the 20 requests another
// tenant sends meanwhile are all admitted. On virtual time: the clock moves only when the
// test moves it, so every wait the server observes is the pause the
// senders chose (stamped at the first byte, each request seemed to wait
// 500 ms, and the controller shed the other tenant's requests).
func TestSlowSendersDoNotForgeQueueDelay(t *testing.T) {
	clk := &vclock{now: time.Now()}
	q := pressure.NewQueueDelay()
	ctl := admit.New(admit.WithSignals(q), admit.WithSeed(1))
	seen := &maxQueue{next: q}
	h := NewHandler(okHandler, ctl, WithQueueDelay(seen),
		WithTenant(func(r *http.Request) string { return r.Header.Get("X-Who") }),
		func(c *handlerConfig) { c.now = clk.Now })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reads := make(chan string, 1<<12)
	srv := &http.Server{Handler: h, ConnContext: ConnContext}
	go func() { _ = srv.Serve(&stampListener{Listener: &readSignal{ln, reads}, clock: clk.mono}) }()
	t.Cleanup(func() { srv.Close() })

	step := func(d time.Duration) {
		now := clk.add(d)
		q.SampleAt(now)
		ctl.Step(now)
	}
	step(0)
	addr := ln.Addr().String()
	const conns = 30
	slow := make([]*rawClient, conns)
	slowAddr := map[string]bool{}
	for i := range slow {
		slow[i] = dialRaw(t, addr)
		slowAddr[slow[i].c.LocalAddr().String()] = true
	}
	victim := dialRaw(t, addr)
	const rest = "ET /cheap HTTP/1.1\r\nHost: levee\r\nX-Who: slow\r\n\r\n"
	const victimReq = "GET /cheap HTTP/1.1\r\nHost: levee\r\nX-Who: victim\r\n\r\n"

	sendFirstBytes := func(round int) {
		for _, rc := range slow {
			rc.write(t, "G")
		}
		got := map[string]bool{}
		timeout := time.After(10 * time.Second)
		for len(got) < conns {
			select {
			case a := <-reads:
				if slowAddr[a] {
					got[a] = true
				}
			case <-timeout:
				t.Fatalf("round %d: the server read the first byte of %d of %d connections", round, len(got), conns)
			}
		}
	}
	// Each round: the slow connections have sent their first byte; 500 ms
	// pass in steps of 50 ms, the other tenant sending a request in the
	// first two (right after the slow requests of the round before were
	// served); then the slow connections send the rest, are answered, and
	// start their next request at once.
	victimRejected, victimSent := 0, 0
	sendFirstBytes(0)
	for round := range 10 {
		for i := range 10 {
			step(50 * time.Millisecond)
			if i < 2 {
				victim.write(t, victimReq)
				victimSent++
				if st := victim.status(t); st != http.StatusOK {
					victimRejected++
				}
			}
		}
		for _, rc := range slow {
			rc.write(t, rest)
		}
		for _, rc := range slow {
			_ = rc.status(t)
		}
		for len(reads) > 0 { // the read reports of this round
			<-reads
		}
		sendFirstBytes(round + 1)
	}
	seen.mu.Lock()
	longest := seen.max
	seen.mu.Unlock()
	if longest != 0 {
		t.Errorf("longest queue delay observed %v, want 0 (the server never queued)", longest)
	}
	if v := q.Value(); v > q.Target() {
		t.Errorf("queue-delay signal %.3fs, want ≤ its target %.3fs", v, q.Target())
	}
	if victimRejected != 0 {
		t.Errorf("the other tenant had %d of %d requests rejected, want none", victimRejected, victimSent)
	}
}

// TestStatusPollKeepsNoStamp is the exact sequence of a status page polled
// on a keep-alive connection beside the API: the poll is routed around the
// Handler, so nothing takes its arrival stamp; the next API request on the
// connection, 5 s later with a 1 s budget, must be served, not answered
// "504 deadline" for a stamp that belonged to the poll.
func TestStatusPollKeepsNoStamp(t *testing.T) {
	clk := &vclock{now: time.Now()}
	ctl := admit.New()
	st := StatusHandler(ctl)
	defer st.Stop()
	mux := http.NewServeMux()
	mux.Handle("/status", st)
	mux.Handle("/", NewHandler(okHandler, ctl, func(c *handlerConfig) { c.now = clk.Now }))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ConnContext: ConnContext}
	go func() { _ = srv.Serve(&stampListener{Listener: ln, clock: clk.mono}) }()
	t.Cleanup(func() { srv.Close() })

	rc := dialRaw(t, ln.Addr().String())
	rc.write(t, "GET /status?format=json HTTP/1.1\r\nHost: levee\r\n\r\n")
	if got := rc.status(t); got != http.StatusOK {
		t.Fatalf("status poll: %d, want 200", got)
	}
	clk.add(5 * time.Second)
	rc.write(t, "GET /api HTTP/1.1\r\nHost: levee\r\nLevee-Timeout-Ms: 1000\r\n\r\n")
	if got := rc.status(t); got != http.StatusOK {
		t.Errorf("API request after the poll: %d, want 200", got)
	}
}
