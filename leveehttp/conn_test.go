package leveehttp

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"
)

// dataConn is a net.Conn whose reads always return one byte.
type dataConn struct{ net.Conn }

func (dataConn) Read(p []byte) (int, error) { return copy(p, "x"), nil }

func TestArrivalStamps(t *testing.T) {
	sc := &stampConn{Conn: dataConn{}}
	ctx := context.WithValue(context.Background(), connKey{}, sc)
	req := func(method string, body bool, major int) *http.Request {
		var b io.Reader
		if body {
			b = strings.NewReader("payload")
		}
		r := httptest.NewRequest(method, "/", b).WithContext(ctx)
		r.ProtoMajor = major
		return r
	}
	read := func() { _, _ = sc.Read(make([]byte, 1)) }
	later := func() time.Time { return time.Now().Add(time.Hour) }

	steps := []struct {
		name    string
		read    bool
		r       *http.Request
		stamped bool // arrival before now
	}{
		{"first request stamped", true, req("GET", false, 1), true},
		{"keep-alive request after a bodiless one stamped", true, req("POST", true, 1), true},
		{"request after one with a body falls back", true, req("GET", false, 1), false},
		{"re-armed after the bodiless fallback", true, req("GET", false, 1), true},
		{"pipelined request without a read falls back", false, req("GET", false, 1), false},
		{"HTTP/2 ignores stamps", true, req("GET", false, 2), false},
	}
	for _, s := range steps {
		if s.read {
			read()
		}
		now := later()
		got := arrivalOf(s.r, now)
		if stamped := got.Before(now); stamped != s.stamped {
			t.Errorf("%s: stamped = %v; want %v", s.name, stamped, s.stamped)
		}
	}
}

// TestListenerKeepAlive runs real requests over one loopback keep-alive
// connection and checks which of them were stamped at their first bytes.
func TestListenerKeepAlive(t *testing.T) {
	q := &syncQueue{}
	h := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}), nil, WithQueueDelay(q))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnContext: ConnContext}
	go func() { _ = srv.Serve(Listener(ln)) }()
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	reused := 0
	send := func(method, body string) {
		var b io.Reader
		if body != "" {
			b = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+"/", b)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) {
				if i.Reused {
					reused++
				}
			}}))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	send("GET", "")
	send("GET", "")
	send("POST", "body")
	send("GET", "") // after a body: falls back to the handler's start
	send("GET", "")
	if reused != 4 {
		t.Fatalf("connection reused %d times; want 4 (one keep-alive connection)", reused)
	}
	got := q.get()
	want := []bool{true, true, true, false, true}
	if len(got) != len(want) {
		t.Fatalf("observed %d delays; want %d", len(got), len(want))
	}
	for i := range want {
		if stamped := got[i] > 0; stamped != want[i] {
			t.Errorf("request %d: delay %v, stamped %v; want stamped %v", i, got[i], stamped, want[i])
		}
	}
}

type syncQueue struct {
	mu sync.Mutex
	d  []time.Duration
}

func (q *syncQueue) Observe(d time.Duration) { q.mu.Lock(); q.d = append(q.d, d); q.mu.Unlock() }
func (q *syncQueue) get() []time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]time.Duration(nil), q.d...)
}
