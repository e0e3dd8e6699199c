package leveehttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/overload"
)

// scriptedManager returns a Manager over one resource whose reading set
// sets, with thresholds 0.8, 0.9, 0.95 and the given options.
func scriptedManager(opts ...overload.Option) (*overload.Manager, func(float64)) {
	var mu sync.Mutex
	v := 0.0
	res := overload.Resource{Name: "memory", Enter: [3]float64{0.8, 0.9, 0.95}, Read: func() overload.Reading {
		mu.Lock()
		defer mu.Unlock()
		return overload.Reading{Value: v}
	}}
	m := overload.New(append([]overload.Option{overload.WithResources(res)}, opts...)...)
	return m, func(x float64) {
		mu.Lock()
		v = x
		mu.Unlock()
	}
}

func TestOverloadGate(t *testing.T) {
	m, set := scriptedManager(overload.WithBodyLimit(100))
	var counted []levee.Criticality
	var called int
	o := NewOverload(m, WithOverloadTrust(func(r *http.Request) bool { return r.Header.Get("X-Trusted") == "yes" }),
		WithOverloadCounter(func(c levee.Criticality, r levee.Reason) {
			if r == levee.Overloaded {
				counted = append(counted, c)
			}
		}))
	h := o.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called++
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	type req struct {
		method, path, crit string
		trusted            bool
		body               string
		chunked            bool
		want               int
	}
	big := strings.Repeat("x", 101)
	steps := []struct {
		v    float64
		reqs []req
	}{
		{0.5, []req{{"POST", "/x", "", false, big, false, 200}, {"GET", "/x", "SHEDDABLE", false, "", false, 200}}},
		{0.85, []req{ // Elevated: large and undeclared bodies refused
			{"POST", "/x", "", false, big, false, 503}, {"POST", "/x", "", false, "small", false, 200},
			{"POST", "/x", "", false, "small", true, 503}, {"POST", "/x", "CRITICAL_PLUS", true, big, false, 200},
		}},
		{0.97, []req{ // Critical: only CRITICAL_PLUS and probes
			{"GET", "/x", "", false, "", false, 503}, {"GET", "/x", "CRITICAL_PLUS", false, "", false, 503},
			{"GET", "/x", "CRITICAL_PLUS", true, "", false, 200}, {"GET", "/healthz", "", false, "", false, 200},
			{"HEAD", "/readyz", "SHEDDABLE", false, "", false, 200}, {"POST", "/healthz", "", false, "", false, 503},
		}},
	}
	for _, s := range steps {
		set(s.v)
		m.Step(time.Now())
		for _, rq := range s.reqs {
			var body io.Reader
			if rq.body != "" {
				body = strings.NewReader(rq.body)
			}
			r := httptest.NewRequest(rq.method, rq.path, body)
			if rq.chunked {
				r.ContentLength = -1
			}
			if rq.crit != "" {
				r.Header.Set(HeaderCriticality, rq.crit)
			}
			if rq.trusted {
				r.Header.Set("X-Trusted", "yes")
			}
			before := called
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != rq.want {
				t.Errorf("reading %v: %s %s %s (trusted %v, body %d, chunked %v): %d, want %d",
					s.v, rq.method, rq.path, rq.crit, rq.trusted, len(rq.body), rq.chunked, w.Code, rq.want)
			}
			if w.Code == 503 {
				if called != before {
					t.Errorf("refused %s %s: the handler ran", rq.method, rq.path)
				}
				if got := w.Header().Get(HeaderReject); got != "overloaded" || w.Header().Get("Retry-After") == "" {
					t.Errorf("refused %s %s: Levee-Reject %q, Retry-After %q; want overloaded with a delay", rq.method, rq.path, got, w.Header().Get("Retry-After"))
				}
			}
		}
	}
	if len(counted) != 5 {
		t.Errorf("counted %d refusals (%v), want 5", len(counted), counted)
	}
	if got := m.InFlight(); got != 0 {
		t.Errorf("in flight %d after every request, want 0", got)
	}
}

// serve starts srv on a loopback listener wrapped as the Overload says,
// and returns its address.
func serve(t *testing.T, o *Overload, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.ConnState = o.ConnState
	srv.ConnContext = ConnContext
	go func() { _ = srv.Serve(Listener(o.Listener(ln))) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func TestOverloadKeepAlive(t *testing.T) {
	m, set := scriptedManager(overload.WithCooldown(overload.KeepAlive, 0))
	srv := &http.Server{}
	o := NewOverload(m, WithOverloadServer(srv))
	srv.Handler = o.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	addr := serve(t, o, srv)
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func() (reused, closed bool) {
		t.Helper()
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }}
		req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", "http://"+addr+"/", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return reused, resp.Close
	}
	set(0.5)
	m.Step(time.Now())
	get()
	if reused, closed := get(); !reused || closed {
		t.Fatalf("normal: connection reused %v, closed %v; want a kept-alive connection", reused, closed)
	}
	set(0.92) // High: keep-alive off
	m.Step(time.Now())
	if reused, closed := get(); reused || !closed {
		// The idle connection was closed by SetKeepAlivesEnabled; the
		// transport may not have noticed yet and retries on a new one.
		t.Errorf("high: connection reused %v, closed %v; want a new connection closed after the response", reused, closed)
	}
	set(0.5)
	m.Step(time.Now())
	get()
	if reused, closed := get(); !reused || closed {
		t.Errorf("normal again: connection reused %v, closed %v; want keep-alive back", reused, closed)
	}
	// A Manager that stops while keep-alive is off: the next request
	// after the state's expiry turns it back on.
	set(0.92)
	m.Step(time.Now().Add(-time.Second)) // a step whose state expired 700 ms ago
	get()
	if reused, closed := get(); !reused || closed {
		t.Errorf("after the state expired: connection reused %v, closed %v; want keep-alive back", reused, closed)
	}
}

// waitClosed reads from c until it is closed by the server, for at most
// limit; it reports whether it was.
func waitClosed(c net.Conn, limit time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

func TestOverloadTimeouts(t *testing.T) {
	m, set := scriptedManager(overload.WithTimeouts(50*time.Millisecond, 80*time.Millisecond))
	// The server's own timeouts are long: only the action can close the
	// connections within the test.
	srv := &http.Server{ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute}
	o := NewOverload(m, WithOverloadServer(srv))
	srv.Handler = o.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	addr := serve(t, o, srv)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	set(0.5)
	m.Step(time.Now())
	idle, partial := dial(), dial()
	// One request, then the connection waits idle for the next.
	if _, err := io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := io.WriteString(partial, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	if waitClosed(idle, 300*time.Millisecond) || waitClosed(partial, 300*time.Millisecond) {
		t.Fatal("normal: a connection was closed within 300 ms with the server's timeouts at a minute")
	}
	set(0.92) // High: Timeouts active, applied to the connections waiting
	m.Step(time.Now())
	if !waitClosed(idle, 10*time.Second) {
		t.Error("high: the idle connection stayed open 10 s (short idle timeout 50 ms)")
	}
	if !waitClosed(partial, 10*time.Second) {
		t.Error("high: the connection with a partial head stayed open 10 s (short header timeout 80 ms)")
	}
	fresh := dial()
	if !waitClosed(fresh, 10*time.Second) {
		t.Error("high: a new connection that sends nothing stayed open 10 s")
	}
	// A health probe is still served on a new connection.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := c.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("high: health probe: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// emfileListener fails its first Accept with EMFILE.
type emfileListener struct {
	net.Listener
	once sync.Once
}

func (l *emfileListener) Accept() (net.Conn, error) {
	var err error
	l.once.Do(func() { err = &net.OpError{Op: "accept", Net: "tcp", Err: syscall.EMFILE} })
	if err != nil {
		return nil, err
	}
	return l.Listener.Accept()
}

func TestOverloadOutOfDescriptors(t *testing.T) {
	m, _ := scriptedManager()
	o := NewOverload(m)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ol := o.Listener(ln)
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	idle, err := ol.Accept() // a connection that sends nothing: idle
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	waiting := dial() // a probe, waiting in the backlog
	el := o.Listener(&emfileListener{Listener: ln})
	got, err := el.Accept()
	if err != nil {
		t.Fatalf("Accept after EMFILE: %v, want the waiting connection, taken at once", err)
	}
	defer got.Close()
	if got.RemoteAddr().String() != waiting.LocalAddr().String() {
		t.Errorf("accepted %v, want the waiting connection %v", got.RemoteAddr(), waiting.LocalAddr())
	}
	_ = idle.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the idle connection after EMFILE: read %v, want it closed", err)
	}
	// A second EMFILE within 100 ms closes nothing more and is returned.
	el = o.Listener(&emfileListener{Listener: ln})
	if _, err := el.Accept(); !isOutOfDescriptors(err) {
		t.Errorf("a second EMFILE at once: %v, want it returned", err)
	}
}

func TestOverloadStatusHandler(t *testing.T) {
	m, set := scriptedManager()
	set(0.97)
	m.Step(time.Now())
	w := httptest.NewRecorder()
	OverloadStatus(m).ServeHTTP(w, httptest.NewRequest("GET", "/levee/overload", nil))
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"level":"critical"`) || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("status: %d %s %q", w.Code, w.Header().Get("Content-Type"), w.Body.String())
	}
}

// BenchmarkOverloadCheck is the gate's cost on the request path, at
// Normal (no action concerns requests) and with the InFlight cap set.
func BenchmarkOverloadCheck(b *testing.B) {
	for _, bc := range []struct {
		name string
		v    float64
	}{{"normal", 0.1}, {"critical", 0.97}} {
		b.Run(bc.name, func(b *testing.B) {
			m, set := scriptedManager(overload.WithPeriod(10 * time.Second))
			o := NewOverload(m)
			set(bc.v)
			m.Step(time.Now())
			r := httptest.NewRequest("GET", "/x", nil)
			now := time.Now()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if o.Check(r, levee.CriticalPlus, now) == nil {
						o.Done()
					}
				}
			})
		})
	}
}

// TestHandlerOverloadHook: the Handler's gate (WithOverload) refuses
// before admission, through the Responder, counted once by the
// Overload's counter; probes and CRITICAL_PLUS from a trusted caller pass;
// a request let through is ended when the Handler returns, whatever its
// outcome (a panic included).
func TestHandlerOverloadHook(t *testing.T) {
	m, set := scriptedManager()
	ctl := admit.New()
	o := NewOverload(m, WithOverloadCounter(ctl.CountRejected))
	var inFlight int64 = -1
	h := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight = m.InFlight()
		if r.URL.Path == "/panic" {
			panic(http.ErrAbortHandler)
		}
	}), ctl, WithOverload(o), WithTrust(func(r *http.Request) bool { return r.Header.Get("X-Trusted") == "yes" }),
		WithResponder(ProblemJSON), WithProblemReporter(func(string, string) {}))
	do := func(path, crit string, trusted bool) int {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set(HeaderCriticality, crit)
		if trusted {
			r.Header.Set("X-Trusted", "yes")
		}
		w := httptest.NewRecorder()
		func() {
			defer func() { _ = recover() }()
			h.ServeHTTP(w, r)
		}()
		if w.Code == http.StatusServiceUnavailable && !strings.Contains(w.Body.String(), `"reject"`) {
			t.Errorf("%s %s: refusal %q not answered by the Responder", path, crit, w.Body.String())
		}
		return w.Code
	}
	for _, tc := range []struct {
		v       float64
		path    string
		crit    string
		trusted bool
		want    int
	}{
		{0.5, "/x", "SHEDDABLE", false, 200},
		{0.5, "/panic", "CRITICAL", false, 200},
		{0.97, "/x", "CRITICAL", false, 503},
		{0.97, "/x", "CRITICAL_PLUS", false, 503}, // untrusted: read as CRITICAL
		{0.97, "/x", "CRITICAL_PLUS", true, 200},
		{0.97, "/healthz", "SHEDDABLE", false, 200},
	} {
		set(tc.v)
		m.Step(time.Now())
		inFlight = -1
		if got := do(tc.path, tc.crit, tc.trusted); got != tc.want {
			t.Errorf("reading %v, %s %s trusted %v: %d, want %d", tc.v, tc.path, tc.crit, tc.trusted, got, tc.want)
		}
		wantIn := int64(1)
		switch {
		case tc.path == "/healthz":
			wantIn = 0 // a probe never enters the gate
		case tc.want != 200:
			wantIn = -1 // next never ran
		}
		if inFlight != wantIn {
			t.Errorf("reading %v, %s %s: in flight in the handler %d, want %d", tc.v, tc.path, tc.crit, inFlight, wantIn)
		}
		if n := m.InFlight(); n != 0 {
			t.Errorf("reading %v, %s %s: %d in flight after the Handler returned, want 0", tc.v, tc.path, tc.crit, n)
		}
	}
	snap := ctl.Snapshot()
	if got := snap.Rejected[levee.Critical][levee.Overloaded]; got != 2 {
		t.Errorf("controller counted %d CRITICAL overload rejections, want the gate's 2", got)
	}
	if got := m.Refused(overload.RefuseCriticalOnly, levee.Critical); got != 2 {
		t.Errorf("manager refused %d CRITICAL, want 2", got)
	}
}
