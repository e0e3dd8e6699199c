package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// liveBackend is a real HTTP server on loopback whose behaviour a test
// switches: normal, slowed, resetting before or in the middle of its
// answer, or killed (listener and connections closed).
type liveBackend struct {
	srv   *httptest.Server
	addr  string
	mode  atomic.Int32
	delay atomic.Int64
	got   atomic.Int64
}

const (
	modeOK = iota
	modeResetBefore
	modeResetMidBody
)

func newLiveBackend(t *testing.T) *liveBackend {
	b := &liveBackend{}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	b.addr = strings.TrimPrefix(b.srv.URL, "http://")
	t.Cleanup(b.srv.Close)
	return b
}

func (b *liveBackend) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		return
	}
	b.got.Add(1)
	_, _ = io.Copy(io.Discard, r.Body)
	time.Sleep(time.Duration(b.delay.Load()))
	switch b.mode.Load() {
	case modeResetBefore:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			conn.Close()
		}
		return
	case modeResetMidBody:
		w.Header().Set("Content-Length", "100000")
		w.WriteHeader(200)
		_, _ = w.Write(make([]byte, 1000))
		http.NewResponseController(w).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			conn.Close()
		}
		return
	}
	_, _ = io.WriteString(w, "ok "+b.addr)
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// settle waits (bounded) until f() ≤ want, and returns the last value.
func settle(f func() int, want int) int {
	v := f()
	for i := 0; i < 100 && v > want; i++ {
		time.Sleep(50 * time.Millisecond)
		v = f()
	}
	return v
}

// TestChaos drives a proxy on loopback through backend and client
// failures: a killed backend, one slowed 10×, all down, a client that
// disconnects in the middle of its body, a backend that resets before
// and in the middle of its response, and 1,000 idle keep-alive clients.
// Each failure is answered with its status and reason, nothing panics,
// and afterwards the goroutines and file descriptors are back where they
// were.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback")
	}
	goroutines0, fds0 := runtime.NumGoroutine(), openFDs()

	var bs [3]*liveBackend
	cfg := DefaultConfig()
	cfg.Backends.Conn.ResponseHeaderTimeout = time.Second
	for i := range bs {
		bs[i] = newLiveBackend(t)
		cfg.Backends.Static = append(cfg.Backends.Static, Endpoint{Address: bs[i].addr})
	}
	h, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var loops sync.WaitGroup
	loops.Go(func() { h.Run(ctx) })
	front := httptest.NewServer(h)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 10 * time.Second}

	get := func(method, path string, body io.Reader) (int, string, string) {
		req, _ := http.NewRequest(method, front.URL+path, body)
		resp, err := client.Do(req)
		if err != nil {
			return 0, "", err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return resp.StatusCode, resp.Header.Get(HeaderError), "body: " + err.Error()
		}
		return resp.StatusCode, resp.Header.Get(HeaderError), string(b)
	}
	expect := func(name string, n int, method string, wantCode int, wantReason string) {
		t.Helper()
		for i := range n {
			code, reason, body := get(method, "/x", nil)
			if code != wantCode || reason != wantReason {
				t.Errorf("%s, request %d: %d %q %q, want %d %q", name, i, code, reason, body, wantCode, wantReason)
				return
			}
		}
	}

	expect("all up", 30, "GET", 200, "")

	bs[0].srv.CloseClientConnections()
	bs[0].srv.Listener.Close()
	expect("one killed: retried elsewhere, then ejected", 30, "GET", 200, "")
	expect("one killed: POST retried when never sent", 10, "POST", 200, "")

	bs[1].delay.Store(int64(50 * time.Millisecond)) // 10× a 5 ms backend
	expect("one slowed 10×", 10, "GET", 200, "")
	bs[1].delay.Store(0)

	bs[2].mode.Store(modeResetBefore)
	bs[1].mode.Store(modeResetBefore)
	expect("resets before the answer: POST not retried", 5, "POST", 502, "reset")
	bs[2].mode.Store(modeResetMidBody)
	bs[1].mode.Store(modeResetMidBody)
	// Cut in the middle of the body: the proxy cannot take the status
	// back, so the caller's connection is aborted (before or after the
	// buffered headers reach it), never a complete answer; the backend's
	// reset is counted.
	code, _, body := get("GET", "/x", nil)
	if code == 200 && !strings.HasPrefix(body, "body: ") || code != 0 && code != 200 {
		t.Errorf("reset mid-body: %d %q, want an aborted answer", code, body)
	}
	var resets uint64
	for _, b := range h.Status().Backends {
		resets += b.Resets
	}
	if resets == 0 {
		t.Errorf("reset mid-body not counted")
	}
	bs[2].mode.Store(modeOK)
	bs[1].mode.Store(modeOK)

	// A client that disconnects in the middle of its body.
	for range 5 {
		conn, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT /x HTTP/1.1\r\nHost: p\r\nContent-Length: 1000000\r\n\r\n")
		_, _ = conn.Write(make([]byte, 50000))
		conn.Close()
	}
	expect("after clients left mid-body", 10, "GET", 200, "")

	// All down.
	for _, b := range bs[1:] {
		b.srv.CloseClientConnections()
		b.srv.Listener.Close()
	}
	for range 20 {
		code, reason, _ := get("GET", "/x", nil)
		if code != 502 && code != 503 || reason != "unreachable" && reason != "no-backend" {
			t.Errorf("all down: %d %q, want 502 unreachable or 503 no-backend", code, reason)
		}
	}

	// 1,000 idle keep-alive clients.
	conns := make([]net.Conn, 0, 1000)
	for range 1000 {
		c, err := net.Dial("tcp", strings.TrimPrefix(front.URL, "http://"))
		if err != nil {
			t.Fatalf("client %d: %v", len(conns), err)
		}
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: p\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("idle client %d: %v", len(conns), err)
		}
		resp.Body.Close()
		conns = append(conns, c)
	}
	if code, _, _ := get("GET", "/healthz", nil); code != 200 {
		t.Errorf("with 1,000 idle clients: probe %d, want 200", code)
	}
	for _, c := range conns {
		c.Close()
	}

	front.Close()
	client.CloseIdleConnections()
	cancel()
	loops.Wait()
	h.CloseIdleConnections()
	for _, b := range bs {
		b.srv.Close()
	}
	if g := settle(runtime.NumGoroutine, goroutines0); g > goroutines0 {
		buf := make([]byte, 1<<20)
		t.Errorf("goroutines %d, %d before:\n%s", g, goroutines0, buf[:runtime.Stack(buf, true)])
	}
	if n := settle(openFDs, fds0); n > fds0 {
		t.Errorf("open file descriptors %d, %d before", n, fds0)
	}
	st := h.Status()
	t.Logf("proxy answers %v; goroutines %d→%d, fds %d→%d", st.Answers, goroutines0, runtime.NumGoroutine(), fds0, openFDs())
}
