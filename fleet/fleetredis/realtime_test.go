//go:build realtime

package fleetredis

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/fleet"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/pressure"
)

// The routes of the fleet test's service: fixed work, the expensive one
// four times the cheap one.
const (
	cheapWork     = 200_000
	expensiveWork = 4 * cheapWork
)

var sink atomic.Uint64

// work burns CPU: n rounds of a xorshift.
func work(n int) {
	x := uint64(88172645463325252)
	for range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink.Add(x)
}

var fleetCfg = fleet.Config{Tenants: map[string]fleet.Quota{"T": {Cores: 0.3}, "other": {Cores: 1}}}

// TestFleetChild is one instance of the fleet test, run in a process of
// its own by TestFleetThreeProcesses (it does nothing otherwise): an HTTP
// server whose /cheap and /expensive routes are metered and admitted
// under the fleet quota, and whose /stats serves the Limiter's Snapshot.
// It prints its address and serves until its standard input closes.
func TestFleetChild(t *testing.T) {
	addr := os.Getenv("LEVEE_FLEET_CHILD_REDIS")
	if addr == "" {
		t.Skip("run by TestFleetThreeProcesses")
	}
	l, err := fleet.New(fleetCfg, fleet.WithInstance(os.Getenv("LEVEE_FLEET_CHILD_ID")), fleet.WithInitialInstances(3))
	if err != nil {
		t.Fatal(err)
	}
	st, err := New(redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond}), "three")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go l.Run(ctx, st)
	ctl := admit.New(admit.WithTenantLimiter(l))
	mux := http.NewServeMux()
	mux.HandleFunc("/cheap", func(w http.ResponseWriter, r *http.Request) { work(cheapWork) })
	mux.HandleFunc("/expensive", func(w http.ResponseWriter, r *http.Request) { work(expensiveWork) })
	h := leveehttp.NewHandler(l.Handler(mux, func(r *http.Request) string { return r.URL.Path }), ctl,
		leveehttp.WithTrust(func(*http.Request) bool { return true }))
	top := http.NewServeMux()
	top.Handle("/", h)
	top.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) { _ = json.NewEncoder(w).Encode(l.Snapshot()) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go http.Serve(ln, top)
	fmt.Printf("ADDR %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// cpuPerOp measures the CPU time of one call of f, by process CPU time
// over repeated calls.
func cpuPerOp(f func()) float64 {
	var best = math.Inf(1)
	for range 5 {
		c0, _ := pressure.ProcessCPU()
		for range 200 {
			f()
		}
		c1, _ := pressure.ProcessCPU()
		best = math.Min(best, (c1-c0).Seconds()/200)
	}
	return best
}

func TestFleetThreeProcesses(t *testing.T) {
	srv := startRedis(t)
	// Offline: what each route costs, measured in this process.
	cheapCPU, expCPU := cpuPerOp(func() { work(cheapWork) }), cpuPerOp(func() { work(expensiveWork) })
	t.Logf("offline: cheap %.3f ms, expensive %.3f ms of CPU per request (ratio %.2f)", cheapCPU*1e3, expCPU*1e3, expCPU/cheapCPU)

	var addrs []string
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFleetChild$", "-test.v")
		cmd.Env = append(os.Environ(), "LEVEE_FLEET_CHILD_REDIS="+srv.addr(), fmt.Sprintf("LEVEE_FLEET_CHILD_ID=p%d", i))
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
				addrs = append(addrs, a)
				break
			}
		}
		go io.Copy(io.Discard, out)
	}
	if len(addrs) != 3 {
		t.Fatalf("started %d instances, want 3", len(addrs))
	}

	// T offers about twice its quota, half cheap and half expensive
	// requests, 70/20/10 across the instances; "other" a third of its
	// quota, evenly.
	perReq := (cheapCPU + expCPU) / 2
	tRate := 0.6 / perReq
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var wg sync.WaitGroup
	var failed, otherRejected atomic.Int64
	offer := func(addr, tenant string, rate float64, paths ...string) {
		defer wg.Done()
		iv := time.Duration(float64(time.Second) / rate)
		sem := make(chan struct{}, 32)
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(iv):
			}
			select {
			case sem <- struct{}{}:
			default:
				continue // the generator's own bound: skip, do not queue
			}
			go func(path string) {
				defer func() { <-sem }()
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+path, nil)
				req.Header.Set("Levee-Tenant", tenant)
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 && tenant == "other" {
					otherRejected.Add(1)
				}
				if resp.StatusCode != 200 && resp.StatusCode != 429 {
					failed.Add(1)
				}
			}(paths[i%len(paths)])
		}
	}
	for i, share := range []float64{0.7, 0.2, 0.1} {
		wg.Add(2)
		go offer(addrs[i], "T", tRate*share, "/cheap", "/expensive")
		go offer(addrs[i], "other", 0.33/cheapCPU/3, "/cheap")
	}

	stats := func() []fleet.Snapshot {
		var out []fleet.Snapshot
		for _, a := range addrs {
			resp, err := http.Get("http://" + a + "/stats")
			if err != nil {
				t.Fatal(err)
			}
			var s fleet.Snapshot
			if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			out = append(out, s)
		}
		return out
	}
	cost := func(ss []fleet.Snapshot, tenant string) (c float64, rejected uint64) {
		for _, s := range ss {
			ts, _ := s.Tenant(tenant)
			c += ts.CostCoreSeconds
			rejected += ts.Rejected
		}
		return c, rejected
	}
	// Fleet usage of T second by second.
	start := time.Now()
	prev, prevAt := stats(), time.Now()
	var perSec []float64
	for range 30 {
		time.Sleep(time.Second)
		cur, at := stats(), time.Now()
		c1, _ := cost(cur, "T")
		c0, _ := cost(prev, "T")
		perSec = append(perSec, (c1-c0)/at.Sub(prevAt).Seconds())
		prev, prevAt = cur, at
	}
	cancel()
	wg.Wait()
	t.Logf("T's fleet usage, cores, second by second from the start: %.3f", perSec)
	// Convergence: the first second from which every 5-s window (five
	// rounds: the meter's costs land once a round) is within ±10%.
	conv := -1
	for i := 0; i+5 <= len(perSec) && conv < 0; i++ {
		ok := true
		for j := i; j+5 <= len(perSec); j++ {
			var w float64
			for _, v := range perSec[j : j+5] {
				w += v / 5
			}
			ok = ok && math.Abs(w-0.3) <= 0.03
		}
		if ok {
			conv = i
		}
	}
	// The acceptance figure: the mean over the last 20 s.
	var mean float64
	for _, v := range perSec[10:] {
		mean += v
	}
	mean /= float64(len(perSec) - 10)
	t.Logf("T's mean fleet usage over seconds 10-30: %.3f cores (quota 0.3); every 5-s window within ±10%% from second %d on (-1: never)", mean, conv)
	if math.Abs(mean-0.3) > 0.03 {
		t.Errorf("T's fleet usage %.3f cores, want 0.3 ±10%%", mean)
	}
	if n := otherRejected.Load(); n != 0 {
		t.Errorf("other tenant: %d requests rejected, want none", n)
	}
	if n := failed.Load(); n != 0 {
		t.Errorf("%d requests failed (not 200 or 429), want none", n)
	}
	// Cost per request by route, as the meter divided the CPU.
	var per = map[string][2]float64{}
	for _, s := range prev {
		ts, _ := s.Tenant("T")
		for _, r := range ts.Routes {
			p := per[r.Route]
			per[r.Route] = [2]float64{p[0] + r.CostCoreSeconds, p[1] + float64(r.Requests)}
		}
	}
	var names []string
	for n := range per {
		names = append(names, n)
	}
	sort.Strings(names)
	ch, ex := per["/cheap"], per["/expensive"]
	if ch[1] == 0 || ex[1] == 0 {
		t.Fatalf("routes metered: %v", per)
	}
	got, want := (ex[0]/ex[1])/(ch[0]/ch[1]), expCPU/cheapCPU
	t.Logf("metered: cheap %.3f ms, expensive %.3f ms per request (ratio %.2f; offline %.2f); %.0f s after start",
		ch[0]/ch[1]*1e3, ex[0]/ex[1]*1e3, got, want, time.Since(start).Seconds())
	if math.Abs(got/want-1) > 0.2 {
		t.Errorf("expensive/cheap metered cost ratio %.2f, offline %.2f: want within ±20%%", got, want)
	}
}
