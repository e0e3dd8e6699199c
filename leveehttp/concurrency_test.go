package leveehttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/pressure"
	"github.com/levee-dev/levee/retry"
)

// TestConcurrencySignal checks what the Handler reports to the
// concurrency signal: a request is in flight while its handler runs and
// not after; while it waits for its caller's body it is not; a streamed
// response leaves nothing behind; the in-handler time excludes the body's
// upload.
func TestConcurrencySignal(t *testing.T) {
	c := pressure.NewConcurrency()
	c.SampleAt(time.Now()) // opens the first sample period
	inside := make(chan int, 1)
	midBody := make(chan int, 1)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside <- c.InFlight()
		if r.URL.Path == "/upload" {
			buf := make([]byte, 1)
			r.Body.Read(buf) // the first byte arrives at once
			go func() { time.Sleep(50 * time.Millisecond); midBody <- c.InFlight() }()
			io.ReadAll(r.Body) // the rest after 200 ms
		}
		if r.URL.Path == "/stream" {
			w.(http.Flusher).Flush()
		}
	})
	h := NewHandler(next, admit.New(), WithConcurrency(c), WithProblemReporter(func(string, string) {}))

	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if in, after := <-inside, c.InFlight(); in != 1 || after != 0 {
		t.Errorf("in flight inside the handler %d, after %d; want 1, 0", in, after)
	}

	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte("x"))
		time.Sleep(200 * time.Millisecond)
		pw.Write([]byte("rest"))
		pw.Close()
	}()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/upload", pr))
	<-inside
	if mid, after := <-midBody, c.InFlight(); mid != 0 || after != 0 {
		t.Errorf("in flight while the caller sends its body %d, after %d; want 0, 0", mid, after)
	}

	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/stream", nil))
	<-inside
	if after := c.InFlight(); after != 0 {
		t.Errorf("in flight after a streamed response %d, want 0", after)
	}

	// The learned in-handler latency of 64 uploads (enough evidence) that
	// each take their caller 100 ms excludes that time.
	c2 := pressure.NewConcurrency()
	c2.SampleAt(time.Now())
	up := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.ReadAll(r.Body) }),
		admit.New(), WithConcurrency(c2), WithProblemReporter(func(string, string) {}))
	const upload = 100 * time.Millisecond
	var wg sync.WaitGroup
	for range 64 {
		pr, pw := io.Pipe()
		go func() {
			pw.Write([]byte("x"))
			time.Sleep(upload)
			pw.Close()
		}()
		wg.Go(func() { up.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/", pr)) })
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // evidence needs 250 ms of samples
	c2.SampleAt(time.Now())
	if r := c2.Reading(); r.Throughput == 0 || r.Latency >= upload/4 {
		t.Errorf("mean in-handler time %v (throughput %v/s) for uploads taking their callers %v: want the callers' time excluded", r.Latency, r.Throughput, upload)
	}
}

// TestPausedWhileRetrying: a handler whose client call through the
// Transport waits out a downstream's Retry-After is out of the
// concurrency signal's count for the wait. (A mid tier counting its calls asleep on a backend's
// pushback as waiting refused everything until they woke up, its backend
// idle: seconds of nothing served in the simulator.)
func TestPausedWhileRetrying(t *testing.T) {
	var calls atomic.Int32
	rejected := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			WriteRejection(w, &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second})
			close(rejected)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer backend.Close()
	client := &http.Client{Transport: NewTransport(http.DefaultTransport,
		func(c *transportConfig) { c.policy = retry.Policy{Budget: retry.Unlimited()} })}

	c := pressure.NewConcurrency()
	c.SampleAt(time.Now())
	midWait := make(chan int, 1)
	var status int
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if levee.PauserFrom(r.Context()) == nil {
			t.Error("no levee.Pauser in an admitted request's context")
		}
		go func() {
			// Between the rejection and the retry (≥ 750 ms by the client's
			// rule), watch for the request to leave the count; without the
			// pause it stays 1 until the handler returns.
			<-rejected
			for calls.Load() < 2 {
				if c.InFlight() == 0 {
					midWait <- 0
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			midWait <- 1 // retried without ever leaving the count
		}()
		req, _ := http.NewRequestWithContext(r.Context(), "GET", backend.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("client call: %v", err)
			return
		}
		resp.Body.Close()
		status = resp.StatusCode
	})
	h := NewHandler(next, admit.New(), WithConcurrency(c), WithProblemReporter(func(string, string) {}))
	start := time.Now()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	took := time.Since(start)
	if mid := <-midWait; mid != 0 || status != 200 || calls.Load() != 2 {
		t.Errorf("in flight during the backoff %d, status %d after %d attempts; want 0, 200, 2", mid, status, calls.Load())
	}
	// The advertised Retry-After is jittered by ±25 % (750 ms at least),
	// and the client waits at least what it is told.
	if took < 750*time.Millisecond {
		t.Fatalf("the call took %v; the Retry-After of 1 s (±25 %%) was not waited", took)
	}
	if got := c.InFlight(); got != 0 {
		t.Errorf("in flight after the handler: %d; want 0", got)
	}
}
