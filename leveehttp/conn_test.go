package leveehttp

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// chunkConn is a net.Conn whose Read returns the chunk the test gives it.
type chunkConn struct {
	net.Conn
	next string
}

func (c *chunkConn) Read(p []byte) (int, error) {
	n := copy(p, c.next)
	c.next = c.next[n:]
	return n, nil
}

func TestScanHead(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		ends   []int // indexes of the chunks that end a head
	}{
		{"whole head", []string{"GET / HTTP/1.1\r\nHost: a\r\n\r\n"}, []int{0}},
		{"bare LF", []string{"GET / HTTP/1.0\n\n"}, []int{0}},
		{"byte by byte", []string{"G", "ET / HTTP/1.1\r", "\n", "Host: a\r\n", "\r", "\n"}, []int{5}},
		{"slow sender", []string{"G", "ET /x HTTP/1.1\r\nHost: a\r\n\r\n"}, []int{1}},
		{"leading blank lines skipped", []string{"\r\n\r\n", "GET / HTTP/1.1\r\n\r\n"}, []int{1}},
		{"headers not ended", []string{"GET / HTTP/1.1\r\nHost: a\r\n", "X-A: 1\r\n"}, nil},
		{"CR inside a line", []string{"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n"}, []int{0}},
		{"two heads in one read", []string{"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n"}, []int{0}},
		{"terminator split", []string{"GET / HTTP/1.1\r\n", "\r", "\nGET /b HTTP/1.1\r\n\r", "\n"}, []int{2, 3}},
	}
	for _, tt := range tests {
		s := int64(headStart)
		var got []int
		for i, c := range tt.chunks {
			var ended bool
			s, ended = scanHead([]byte(c), s)
			if ended {
				got = append(got, i)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.ends) {
			t.Errorf("%s: heads ended in chunks %v, want %v", tt.name, got, tt.ends)
		}
	}
}

// TestArrivalStamps steps one connection through a sequence of requests on
// a virtual clock: each read happens at the given tick, each take is the
// Handler starting a request.
func TestArrivalStamps(t *testing.T) {
	cc := &chunkConn{}
	tick := int64(0)
	sc := &stampConn{Conn: cc, clock: func() int64 { return tick }}
	read := func(at int64, data string) {
		tick, cc.next = at, data
		buf := make([]byte, len(data))
		if n, _ := sc.Read(buf); n != len(data) {
			t.Fatalf("read %d of %d bytes", n, len(data))
		}
	}
	const head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n"
	steps := []struct {
		name  string
		do    func()
		body  bool
		h2    bool
		want  int64 // the stamp the Handler gets; 0: none (its start)
		after func()
	}{
		{name: "a head is stamped when complete", do: func() { read(10, head) }, want: 10},
		{name: "a slow sender is stamped at its last byte", do: func() { read(20, "G"); read(30, head[1:]) }, want: 30},
		{name: "a request with a body", do: func() { read(40, "POST / HTTP/1.1\r\nContent-Length: 6\r\n\r\n") }, body: true, want: 40},
		{name: "after a body: not stamped", do: func() { read(50, "a\n\n\r\n"); read(60, head) }, want: 0},
		{name: "re-armed by a bodiless request", do: func() { read(70, head) }, want: 70},
		{name: "a request around the Handler leaves no stamp", do: func() { read(80, head); read(90, head) }, want: 90},
		{name: "head sent while the previous request ran", do: func() {
			tick = 100
			read(100, head)
			if got := sc.take(false, true); got != 100 {
				t.Fatalf("first request stamped %d, want 100", got)
			}
			read(105, head) // the next head, while the first runs
			tick = 130
			sc.done() // the first request ends
		}, want: 130},
		{name: "two heads in one read: the second falls back", do: func() {
			read(140, head+head)
			if got := sc.take(false, true); got != 140 {
				t.Fatalf("first request stamped %d, want 140", got)
			}
		}, want: 0},
		{name: "HTTP/2 turns stamps off", do: func() { read(150, head) }, h2: true, want: 0},
		{name: "and they stay off", do: func() { read(160, head) }, want: 0},
	}
	for _, s := range steps {
		s.do()
		if got := sc.take(s.body, !s.h2); got != s.want {
			t.Errorf("%s: stamp %d, want %d", s.name, got, s.want)
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

// TestListenerPeer: through Listener (the peer's tenant computed once per
// connection), an untrusted caller's call carries its network as tenant
// and its address as Peer, for the controller's grouping of networks.
func TestListenerPeer(t *testing.T) {
	calls := make(chan levee.Call, 1)
	h := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls <- levee.CallFrom(r.Context())
	}), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnContext: ConnContext}
	go func() { _ = srv.Serve(Listener(ln)) }()
	defer srv.Close()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := levee.Call{Criticality: levee.Critical, Tenant: "127.0.0.0/24", Peer: netip.MustParseAddr("127.0.0.1")}
	if got := <-calls; got != want {
		t.Errorf("call %+v, want %+v", got, want)
	}
}
