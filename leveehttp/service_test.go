package leveehttp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee/admit"
)

// slowBody is an upload its sender trickles: each Read waits gap before
// returning one byte, n bytes in all.
type slowBody struct {
	gap time.Duration
	n   int
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		return 0, io.EOF
	}
	time.Sleep(b.gap)
	b.n--
	p[0] = '1'
	return 1, nil
}

// serviceTimeRun teaches a controller the service time of one route with
// 2,560 requests served by app, each with body() as its body, then sends
// 200 requests with a budget of probe that the route can serve in time
// (a 1-byte body, answered at once) and returns how many were refused as
// "cannot be met". On virtual time (synctest): the controller's clock is
// the bubble's.
func serviceTimeRun(t *testing.T, app http.HandlerFunc, body func() io.Reader, probe time.Duration) (refused int) {
	synctest.Test(t, func(t *testing.T) {
		ctl := admit.New(admit.WithRoute(func(context.Context) string { return "r" }), admit.WithLogger(quiet))
		learning := true
		h := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if learning {
				app(w, r)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}), ctl, WithProblemReporter(func(string, string) {}))
		do := func(b io.Reader, budget time.Duration) int {
			r := httptest.NewRequest("POST", "/r", b)
			r.Header.Set("Levee-Timeout-Ms", strconv.FormatInt(budget.Milliseconds(), 10))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w.Code
		}
		// 256 callers at once, 10 requests each: enough a second for the
		// evidence the controller wants (16 samples in about 10 s, one
		// ticket in 64 measured) even from 2 s requests.
		var wg sync.WaitGroup
		for range 256 {
			wg.Go(func() {
				for range 10 {
					do(body(), 5*time.Second)
				}
			})
		}
		wg.Wait()
		learning = false
		for range 200 {
			if do(strings.NewReader("x"), probe) == http.StatusGatewayTimeout {
				refused++
			}
		}
	})
	return refused
}

// TestServiceTimeLeavesUploadOut: a route whose callers trickle their
// bodies over 300 ms and whose work takes 1 ms is learned as a 1 ms
// route: requests with a 100 ms budget are served. Counted from
// admission, the upload made it a 300 ms route, and such requests were
// refused as "cannot be met" (all but the probes).
func TestServiceTimeLeavesUploadOut(t *testing.T) {
	app := func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	}
	if n := serviceTimeRun(t, app, func() io.Reader { return &slowBody{gap: 100 * time.Millisecond, n: 3} }, 100*time.Millisecond); n != 0 {
		t.Errorf("%d of 200 requests with a 100 ms budget refused after slow uploads to a 1 ms route, want 0", n)
	}
}

// TestServiceTimeCountsWorkAfterTheBody: the work after the body is read
// is service time, whether the handler reads the body to its end or
// decodes a value and stops: a route that works 50 ms after reading is
// learned as one, and requests with a 20 ms budget are refused (but the
// probes, one in 16).
func TestServiceTimeCountsWorkAfterTheBody(t *testing.T) {
	decode := func(w http.ResponseWriter, r *http.Request) {
		var v map[string]int
		if err := json.NewDecoder(r.Body).Decode(&v); err != nil {
			t.Errorf("decode: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
		w.WriteHeader(http.StatusNoContent)
	}
	body := func() io.Reader { return strings.NewReader(`{"a": 1}` + "\n\n\n") }
	if n := serviceTimeRun(t, decode, body, 20*time.Millisecond); n < 180 {
		t.Errorf("%d of 200 requests with a 20 ms budget refused by a 50 ms route, want ≥ 180", n)
	}
}

// TestServiceTimeLeavesStreamsOut: responses flushed before the handler
// returns (a stream, a long poll) teach the route nothing: after 2,000
// streams of 2 s, requests with a 1 s budget are served. Counted, they
// made it a 2 s route and such requests were refused.
func TestServiceTimeLeavesStreamsOut(t *testing.T) {
	stream := func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("event: hello\n\n"))
		w.(http.Flusher).Flush()
		time.Sleep(2 * time.Second)
	}
	if n := serviceTimeRun(t, stream, func() io.Reader { return http.NoBody }, time.Second); n != 0 {
		t.Errorf("%d of 200 requests with a 1 s budget refused after 2 s streams, want 0", n)
	}
}
