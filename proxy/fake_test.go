package proxy

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
)

// fakeBackend is a backend in memory, for tests on virtual time
// (testing/synctest): workers that each hold a request for a fixed time,
// a FIFO queue in front of them that never gives up on a request (a naive
// server: the work is done even for a caller that left), and its health
// path served by the same workers, as the founding text's instances are.
// A dead fakeBackend refuses connections.
type fakeBackend struct {
	addr    string
	workers chan struct{}
	service time.Duration
	slow    atomic.Int64 // multiplies service
	dead    atomic.Bool
	timeout time.Duration // the transport's response-header timeout
	// levee answers 503 overloaded, with Levee-Load, when more than
	// rejectAbove requests wait; 0 never.
	rejectAbove int64
	// jitter varies each service time by ±20%.
	jitter bool

	waiting, started, served, refused, rejected, abandoned atomic.Int64
	mu                                                     sync.Mutex
	startedAt, refusedAt                                   []time.Time // data requests (not health checks)
}

func newFakeBackend(addr string, workers int, service time.Duration) *fakeBackend {
	f := &fakeBackend{addr: addr, workers: make(chan struct{}, workers), service: service, timeout: 10 * time.Second}
	f.slow.Store(1)
	return f
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "net/http: timeout awaiting response headers" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}

func (f *fakeBackend) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		defer r.Body.Close()
	}
	health := r.Header.Get("User-Agent") == "levee-proxy-health"
	if f.dead.Load() {
		if !health {
			f.refused.Add(1)
			f.mu.Lock()
			f.refusedAt = append(f.refusedAt, time.Now())
			f.mu.Unlock()
		}
		return nil, errRefused
	}
	if !health {
		f.started.Add(1)
		f.mu.Lock()
		f.startedAt = append(f.startedAt, time.Now())
		f.mu.Unlock()
	}
	if f.rejectAbove > 0 && f.waiting.Load() > f.rejectAbove {
		f.rejected.Add(1)
		h := http.Header{}
		h.Set(wire.Reject, "overloaded")
		h.Set(wire.RetryAfterMs, "1000")
		h.Set(wire.Load, strconv.FormatFloat(float64(f.waiting.Load())/float64(f.rejectAbove), 'f', 3, 64))
		return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: h, Body: http.NoBody, Request: r}, nil
	}
	done := make(chan *http.Response, 1)
	go f.serve(r, done)
	t := time.NewTimer(f.timeout)
	defer t.Stop()
	select {
	case resp := <-done:
		return resp, nil
	case <-t.C:
		return nil, timeoutErr{}
	case <-r.Context().Done():
		f.abandoned.Add(1)
		return nil, r.Context().Err()
	}
}

func (f *fakeBackend) serve(r *http.Request, done chan<- *http.Response) {
	f.waiting.Add(1)
	f.workers <- struct{}{}
	f.waiting.Add(-1)
	d := f.service * time.Duration(f.slow.Load())
	if f.jitter {
		// Desynchronize completions: on virtual time requests that
		// start together would otherwise all end at the same instant.
		d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	}
	time.Sleep(d)
	<-f.workers
	f.served.Add(1)
	h := http.Header{}
	if f.rejectAbove > 0 {
		h.Set(wire.Load, strconv.FormatFloat(float64(f.waiting.Load())/float64(f.rejectAbove), 'f', 3, 64))
	}
	done <- &http.Response{StatusCode: http.StatusOK, Header: h, Body: http.NoBody, Request: r}
}

// between counts the times in [from, to).
func (f *fakeBackend) between(times *[]time.Time, from, to time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, t := range *times {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// fleet is a set of fake backends behind one Handler.
type fleet struct {
	backends []*fakeBackend
	byAddr   map[string]*fakeBackend
	h        *Handler
	logs     *logRecorder
}

func newFleet(t *testing.T, cfg *Config, backends ...*fakeBackend) *fleet {
	t.Helper()
	fl := &fleet{backends: backends, byAddr: map[string]*fakeBackend{}, logs: &logRecorder{}}
	cfg.Backends.Static = nil
	for _, b := range backends {
		fl.byAddr[b.addr] = b
		cfg.Backends.Static = append(cfg.Backends.Static, Endpoint{Address: b.addr})
	}
	rng := rand.New(rand.NewPCG(7, 11))
	var mu sync.Mutex
	h, err := New(cfg,
		WithTransport(func(addr string) http.RoundTripper { return fl.byAddr[addr] }),
		WithLogger(slog.New(fl.logs)),
		WithRand(func() uint64 { mu.Lock(); defer mu.Unlock(); return rng.Uint64() }),
	)
	if err != nil {
		t.Fatal(err)
	}
	fl.h = h
	return fl
}

// send sends one request to the Handler and returns the status.
func (fl *fleet) send(ctx context.Context, method, path string, c levee.Criticality) int {
	req := httptest.NewRequestWithContext(ctx, method, path, nil)
	req.Header.Set(wire.Criticality, c.String())
	rec := httptest.NewRecorder()
	fl.h.ServeHTTP(rec, req)
	return rec.Code
}

// naiveClient sends a request up to attempts times, at once after each
// failure (no backoff, no budget: the founding text's amplifier), each
// attempt bounded by timeout. It reports whether one succeeded.
func (fl *fleet) naiveClient(c levee.Criticality, attempts int, timeout time.Duration) bool {
	for range attempts {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		code := fl.send(ctx, http.MethodGet, "/work", c)
		cancel()
		if code == http.StatusOK {
			return true
		}
	}
	return false
}

// logRecorder keeps the messages logged, with their (virtual) times.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }

// events returns the times of the messages msg about backend addr.
func (l *logRecorder) events(msg, addr string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Time
	for _, r := range l.recs {
		if r.Message != msg {
			continue
		}
		match := addr == ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "backend" && a.Value.String() == addr {
				match = true
			}
			return true
		})
		if match {
			out = append(out, r.Time)
		}
	}
	return out
}

// isTimeout reports whether err is a timeout (the fake transport's).
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// httptestRecorder sends one request to h and returns the recorder.
func httptestRecorder(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}
