package proxy

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// upstream serves h on loopback with the given protocols and counts the
// connections open at once.
func upstream(t *testing.T, h http.Handler, h2c bool) (addr string, maxOpen *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var open atomic.Int64
	maxOpen = &atomic.Int64{}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n := open.Add(1)
			for m := maxOpen.Load(); n > m && !maxOpen.CompareAndSwap(m, n); m = maxOpen.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		srv.Protocols = &p
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), maxOpen
}

func frontFor(t *testing.T, cfg *Config) (*Handler, string) {
	t.Helper()
	h, err := New(cfg, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	f := httptest.NewServer(h)
	t.Cleanup(func() { f.Close(); h.CloseIdleConnections() })
	return h, f.URL
}

// TestH2C: with protocol h2c the backend is spoken to in HTTP/2 without
// TLS.
func TestH2C(t *testing.T) {
	addr, _ := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}), true)
	cfg := DefaultConfig()
	cfg.Backends.Protocol = "h2c"
	cfg.Backends.Static = []Endpoint{{Address: addr}}
	_, url := frontFor(t, cfg)
	resp, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "HTTP/2.0" {
		t.Errorf("backend spoke %q, want HTTP/2.0", b)
	}
}

// TestMaxConns: a backend's max_conns bounds its connections; requests
// beyond it wait for one.
func TestMaxConns(t *testing.T) {
	addr, maxOpen := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(50 * time.Millisecond)
	}), false)
	cfg := DefaultConfig()
	cfg.Backends.Static = []Endpoint{{Address: addr, MaxConns: 2}}
	_, url := frontFor(t, cfg)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 8 {
		wg.Go(func() {
			resp, err := http.Get(url + "/")
			if err != nil || resp.StatusCode != 200 {
				failed.Add(1)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	if n := maxOpen.Load(); n > 2 || failed.Load() > 0 {
		t.Errorf("backend saw %d connections at once (want ≤ 2), %d requests failed", n, failed.Load())
	}
}

// TestStreaming: bodies stream both ways: the backend reads the first
// part of a request body before the caller has written the rest, and the
// caller reads the first part of the answer before the backend has
// written the rest.
func TestStreaming(t *testing.T) {
	gotFirst := make(chan struct{})
	sendSecond := make(chan struct{})
	addr, _ := upstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		br := bufio.NewReader(r.Body)
		line, _ := br.ReadString('\n')
		if line != "up-1\n" {
			t.Errorf("backend read %q first", line)
		}
		close(gotFirst)
		rest, _ := io.ReadAll(br)
		if string(rest) != "up-2\n" {
			t.Errorf("backend read %q then", rest)
		}
		io.WriteString(w, "down-1\n")
		http.NewResponseController(w).Flush()
		<-sendSecond
		io.WriteString(w, "down-2\n")
	}), false)
	cfg := DefaultConfig()
	cfg.Backends.Static = []Endpoint{{Address: addr}}
	_, url := frontFor(t, cfg)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", url+"/", pr)
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	io.WriteString(pw, "up-1\n")
	select {
	case <-gotFirst:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend never saw the first part: the request body was held back")
	}
	io.WriteString(pw, "up-2\n")
	pw.Close()
	resp := <-done
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() { l, _ := br.ReadString('\n'); first <- l }()
	select {
	case l := <-first:
		if l != "down-1\n" {
			t.Errorf("read %q first", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first part of the answer never came: the response was held back")
	}
	close(sendSecond)
	if rest, _ := io.ReadAll(br); string(rest) != "down-2\n" {
		t.Errorf("read %q then", rest)
	}
}
