// Package routetest checks a router adapter of levee (contrib/leveechi,
// contrib/leveegin, contrib/leveeecho) on loopback: the router is
// protected by leveehttp.Protect with the adapter's route names, a cheap
// and an expensive route (each with a path parameter, so that only
// pattern names can group their requests) are called until the admission
// controller has learned the expensive route's service time, and then a
// budget between the two service times is refused on the expensive route
// only. It is a module of its own, shared by the adapters' tests.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), routetest is a test helper beside the
// adapters, in its own module (github.com/levee-dev/levee/contrib/routetest):
// it imports leveehttp, admit and config, and no router, so that each router
// stays in its adapter's module; only the tests of leveechi, leveegin and
// leveeecho import it.
package routetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
)

// SlowTime is the expensive route's service time; the cheap route answers
// at once. A budget of SlowTime/2 fits the cheap route, not the expensive
// one.
const SlowTime = 30 * time.Millisecond

// Cheap answers at once.
func Cheap(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "cheap") }

// Slow answers after SlowTime.
func Slow(w http.ResponseWriter, r *http.Request) {
	time.Sleep(SlowTime)
	io.WriteString(w, "slow")
}

// Routes says where the router serves Cheap and Slow: paths for a
// parameter id, and the names the adapter must give them.
type Routes struct {
	CheapPath, SlowPath func(id int) string
	CheapName, SlowName string
}

// Check protects router with route names from opt, serves it on loopback
// and checks that the controller learns the service times of rs's two
// routes under their names (see the package documentation).
func Check(t *testing.T, router http.Handler, opt leveehttp.HandlerOption, rs Routes) {
	t.Helper()
	var mu sync.Mutex
	names := map[string]int{}
	route := func(ctx context.Context) string {
		n := leveehttp.Route(ctx)
		mu.Lock()
		names[n]++
		mu.Unlock()
		return n
	}
	p, err := leveehttp.Protect(context.Background(), router,
		leveehttp.WithConfig(config.Default(), config.WithEnv(nil)),
		leveehttp.WithLogger(slog.New(slog.DiscardHandler)),
		leveehttp.WithHandlerOptions(opt),
		leveehttp.WithAdmitOptions(admit.WithRoute(route)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	base := "http://" + ln.Addr().String()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	do := func(path string, budget time.Duration) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if budget > 0 {
			req.Header.Set("Levee-Timeout-Ms", fmt.Sprint(budget.Milliseconds()))
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Levee-Reject")
	}

	// Call both routes, many ids each, until a budget of half the slow
	// route's time is refused there: the controller has learned it (one
	// request in 64 is measured, so this takes a few hundred calls).
	const workers = 32
	budget := SlowTime / 2
	learned := false
	id := 0
	for round := 0; round < 200 && !learned; round++ {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				if w%2 == 0 {
					do(rs.CheapPath(id*workers+w), 0)
				} else {
					do(rs.SlowPath(id*workers+w), 0)
				}
			})
		}
		wg.Wait()
		id++
		if code, reject := do(rs.SlowPath(-1), budget); code == http.StatusGatewayTimeout && reject != "" {
			learned = true
		}
	}
	if !learned {
		t.Fatalf("the expensive route's service time was not learned after %d calls: a %v budget is still admitted; names seen: %v", id*workers, budget, names)
	}
	// The cheap route's service time is short: its budget is never
	// refused for the deadline. On a machine busy with other work the
	// controller may shed for overload (503: its CPU or scheduling
	// latency signal is past target), which says nothing of the route;
	// such a probe is asked again after a pause, up to a bound.
	for probe := 0; ; probe++ {
		code, reject := do(rs.CheapPath(-1), budget)
		if code == http.StatusOK {
			if probe > 0 {
				t.Logf("the cheap route's probe was admitted after %d overload refusals", probe)
			}
			break
		}
		if code != http.StatusServiceUnavailable || !strings.HasPrefix(reject, "overloaded") || probe == 50 {
			t.Errorf("the cheap route with a %v budget = %d %q (after %d overload refusals), want 200: its own service time is short", budget, code, reject, probe)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	var seen []string
	for n := range names {
		seen = append(seen, n)
	}
	sort.Strings(seen)
	want := []string{rs.CheapName, rs.SlowName}
	sort.Strings(want)
	if !slices.Equal(seen, want) {
		t.Errorf("route names %q, want %q", seen, want)
	}
	t.Logf("learned after %d calls; names %v", id*workers, names)
}
