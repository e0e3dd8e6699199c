//go:build realtime

package leveehttp_test

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee/leveehttp"
)

// spin burns d of CPU and ignores cancellation, as a CPU-bound handler
// does.
func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// TestProtectOverload runs the README's setup (ExampleProtect: Protect
// with its defaults, Serve on a listener) under 3× its capacity,
// open-loop: it must shed, and its status page and metrics must stay
// reachable and unshed throughout.
//
//	go test -tags realtime -count=1 -run TestProtectOverload -v ./leveehttp/
func TestProtectOverload(t *testing.T) {
	const (
		cost     = 4 * time.Millisecond
		duration = 4 * time.Second
	)
	ctx := context.Background()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /work", func(w http.ResponseWriter, r *http.Request) { spin(cost) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}

	p, err := leveehttp.Protect(ctx, mux)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	go p.Serve(ln)

	base := "http://" + ln.Addr().String()
	capacity := float64(runtime.GOMAXPROCS(0)) / cost.Seconds()
	rate := 3 * capacity
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1024}}
	var ok, shed, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := make(chan struct{})

	// The operator's view, polled every 100 ms on its own connection.
	type poll struct {
		path string
		code int
		err  error
		took time.Duration
	}
	var polls []poll
	var pollWG sync.WaitGroup
	pollWG.Go(func() {
		ops := &http.Client{Timeout: 2 * time.Second}
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			path := "/levee/status.json"
			if i%2 == 1 {
				path = "/metrics"
			}
			t0 := time.Now()
			resp, err := ops.Get(base + path)
			pl := poll{path: path, err: err, took: time.Since(t0)}
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				pl.code = resp.StatusCode
			}
			polls = append(polls, pl)
		}
	})

	// Open-loop arrivals at 3× capacity, each with a 1 s budget.
	n := int(rate * duration.Seconds())
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		wg.Go(func() {
			resp, err := client.Get(base + "/work")
			switch {
			case err != nil:
				failed.Add(1)
			case resp.StatusCode == 200:
				ok.Add(1)
			case resp.Header.Get("Levee-Reject") != "":
				shed.Add(1)
			default:
				failed.Add(1)
			}
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	close(stop)
	pollWG.Wait()

	elapsed := time.Since(start).Seconds()
	t.Logf("capacity ≈ %.0f/s, offered %.0f/s for %.1fs: %d ok (%.0f/s), %d shed, %d failed",
		capacity, rate, elapsed, ok.Load(), float64(ok.Load())/elapsed, shed.Load(), failed.Load())
	if shed.Load() == 0 {
		t.Errorf("nothing shed at 3× capacity")
	}
	var worst time.Duration
	for _, pl := range polls {
		worst = max(worst, pl.took)
		if pl.err != nil || pl.code != 200 {
			t.Errorf("GET %s under overload: %d %v, want 200", pl.path, pl.code, pl.err)
		}
	}
	t.Logf("%d polls of the status page and metrics, slowest %v", len(polls), worst)
	// Polls are sequential: on a saturated machine each waits for the
	// CPU like everything else, but none is refused or lost.
	if len(polls) < int(duration/time.Second) {
		t.Errorf("%d polls in %v, want at least one a second", len(polls), duration)
	}
	_, body := getBody(t, base+"/metrics")
	if !strings.Contains(body, `levee_rejections_total{criticality="CRITICAL",reason="overloaded"}`) {
		t.Errorf("metrics do not count the overload rejections")
	}
}

func getBody(t *testing.T, url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
