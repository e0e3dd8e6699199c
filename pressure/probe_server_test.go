//go:build probe

package pressure

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type arrivalKey struct{}

// TestProbeServer is "Where the queue really is" on a real process: this
// test process serves HTTP with GOMAXPROCS=1, each request burning ~1 ms
// of CPU; a re-executed copy of the test binary offers open-loop load
// (new connection per request, 1 s timeout). The log shows, per phase,
// what the signals read: CPU against the allowed cores (and what a
// host-wide denominator would say), scheduler latency p99 and the
// queueing delay between accept and handler start.
//
//	go test -tags probe -run ProbeServer -v ./pressure
func TestProbeServer(t *testing.T) {
	if addr := os.Getenv("LEVEE_PROBE_TARGET"); addr != "" {
		loadgen(addr)
		return
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	ipm := itersPerMs()
	cpu, err := NewCPU()
	if err != nil {
		t.Fatal(err)
	}
	sched, queue := NewSchedLatency(), NewQueueDelay()
	var served atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if at, ok := r.Context().Value(arrivalKey{}).(time.Time); ok {
				queue.Observe(time.Since(at))
			}
			spin(ipm)
			served.Add(1)
		}),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, arrivalKey{}, time.Now())
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range []interface{ Run(context.Context) }{cpu, sched, queue} {
		wg.Go(func() { s.Run(ctx) })
	}
	defer func() { cancel(); wg.Wait() }()

	cmd := exec.Command(os.Args[0], "-test.run=^TestProbeServer$")
	cmd.Env = append(os.Environ(), "LEVEE_PROBE_TARGET="+ln.Addr().String(), "GOMAXPROCS=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 2 * int(probePhases[len(probePhases)-1].end/time.Second) {
		time.Sleep(500 * time.Millisecond)
		r := cpu.Reading()
		t.Logf("t=%4.1fs served %5d  cpu %.2f of %v core(s) (host-wide would read %.2f)  sched p99 %7.4fs  queue delay %7.4fs",
			time.Since(start).Seconds(), served.Swap(0), r.Value, r.Cores, r.Value*r.Cores/float64(runtime.NumCPU()), sched.Value(), queue.Value())
		_ = i
	}
	cmd.Wait()
}

var probePhases = []struct {
	rps int
	end time.Duration
}{{100, 3 * time.Second}, {2000, 7 * time.Second}, {100, 10 * time.Second}}

// loadgen offers open-loop load, a new connection per request, bounded to
// 1000 requests in flight; it stops at the last phase's end.
func loadgen(addr string) {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	start := time.Now()
	var inflight atomic.Int64
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for _, ph := range probePhases {
		gap := time.Second / time.Duration(ph.rps)
		for next := time.Now(); next.Sub(start) < ph.end; next = next.Add(gap) {
			time.Sleep(time.Until(next))
			if inflight.Load() >= 1000 {
				failed.Add(1)
				continue
			}
			inflight.Add(1)
			wg.Go(func() {
				defer inflight.Add(-1)
				resp, err := client.Get("http://" + addr + "/")
				if err != nil {
					failed.Add(1)
					return
				}
				resp.Body.Close()
				ok.Add(1)
			})
		}
	}
	wg.Wait()
	fmt.Fprintln(os.Stderr, "loadgen: ok "+strconv.FormatInt(ok.Load(), 10)+" failed "+strconv.FormatInt(failed.Load(), 10))
}
