package leveehttp

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// TestHandlerRunQueue: with a run bound of 1, a second request waits for
// the first to finish before next runs, and a request whose budget ends
// while it waits gets a 504 without next ever running for it.
func TestHandlerRunQueue(t *testing.T) {
	ctl := admit.New(admit.WithRunBound(1))
	release := make(chan struct{})
	var running, peak atomic.Int32
	var mu sync.Mutex
	var ran []string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		mu.Lock()
		ran = append(ran, r.URL.Path)
		mu.Unlock()
		if r.URL.Path == "/hold" {
			<-release
		}
		running.Add(-1)
	})
	h := NewHandler(next, ctl)
	serve := func(path, timeoutMs string) <-chan *httptest.ResponseRecorder {
		out := make(chan *httptest.ResponseRecorder, 1)
		go func() {
			r := httptest.NewRequest("GET", path, nil)
			if timeoutMs != "" {
				r.Header.Set(HeaderTimeoutMs, timeoutMs)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			out <- w
		}()
		return out
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}

	first := serve("/hold", "")
	waitFor("the first request to run", func() bool { return running.Load() == 1 })
	second := serve("/second", "")
	waitFor("the second request to wait", func() bool { return ctl.Snapshot().Waiting == 1 })
	w := <-serve("/late", "30") // its 30 ms end while it waits
	if w.Code != http.StatusGatewayTimeout {
		t.Errorf("request whose budget ended in the run queue: status %d, want 504", w.Code)
	}
	close(release)
	for i, ch := range []<-chan *httptest.ResponseRecorder{first, second} {
		if w := <-ch; w.Code != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i+1, w.Code)
		}
	}
	if p := peak.Load(); p != 1 {
		t.Errorf("%d requests ran at once under a bound of 1", p)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 2 || ran[0] != "/hold" || ran[1] != "/second" {
		t.Errorf("next ran for %v, want [/hold /second]", ran)
	}
	if s := ctl.Snapshot(); s.Running != 0 || s.Waiting != 0 {
		t.Errorf("after every request: running %d, waiting %d, want 0, 0", s.Running, s.Waiting)
	}
}
