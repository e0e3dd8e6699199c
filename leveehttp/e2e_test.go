package leveehttp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
)

// The end-to-end test re-executes this test binary in two more processes,
// selected by e2eRole: a backend and a mid-tier, each on its own loopback
// port, so that every hop crosses a real socket and a process boundary.
const (
	e2eRole    = "LEVEEHTTP_E2E_ROLE"
	e2eBackend = "LEVEEHTTP_E2E_BACKEND"
)

// TestEndToEndRole is the entry point of the child processes; in a normal
// run (no role in the environment) it does nothing.
func TestEndToEndRole(t *testing.T) {
	role := os.Getenv(e2eRole)
	if role == "" {
		t.Skip("child process entry point of TestEndToEnd")
	}
	os.Exit(runRole(role))
}

// hotSignal is a resource reading far above its target: a backend that is
// overloaded for the whole test.
type hotSignal struct{}

func (hotSignal) Name() string    { return "hot" }
func (hotSignal) Value() float64  { return 100 }
func (hotSignal) Target() float64 { return 1 }

// counters is a role's tally, served as JSON on /stats.
type counters struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counters) add(k string) { c.mu.Lock(); c.m[k]++; c.mu.Unlock() }

func (c *counters) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = json.NewEncoder(w).Encode(c.m)
}

type echo struct {
	Criticality string
	Tenant      string
	Attempt     int
	HeaderMs    string
	LeftMs      int64
}

func loopbackOnly(r *http.Request) bool { return strings.HasPrefix(r.RemoteAddr, "127.0.0.1:") }

func runRole(role string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stats := &counters{m: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("/stats", stats)
	var h http.Handler
	switch role {
	case "backend":
		mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
			call := levee.CallFrom(r.Context())
			dl, _ := r.Context().Deadline()
			stats.add(fmt.Sprintf("echo/%d", call.Attempt))
			_ = json.NewEncoder(w).Encode(echo{call.Criticality.String(), call.Tenant, call.Attempt,
				r.Header.Get(HeaderTimeoutMs), time.Until(dl).Milliseconds()})
		})
		normal := NewHandler(mux, admit.New(), WithTrust(loopbackOnly), WithHealthPaths("/stats"))
		// /overloaded is served by a controller whose only signal is far
		// above target, driven on virtual time with traffic until it sheds
		// everything (bounded; its clock ends that far ahead, so deadlines
		// in this test are long). Should admit's dynamics change so that it
		// does not get there, a scripted overload stands in: this test is
		// about the wire, not about admit.
		// Its period is long: a plan that no Step refreshes for four
		// periods expires, and without Run Admit steps a controller a
		// period after its last Step; this one must keep its plan for the
		// whole test.
		hot := admit.New(admit.WithSignals(hotSignal{}), admit.WithPeriod(15*time.Second))
		now := time.Now()
		// Traffic at the top level pushes the ladder past SHEDDABLE, which
		// the test then sends: shed whole, not by a fraction.
		ctx := levee.WithCriticality(context.Background(), levee.CriticalPlus)
		for i := 0; i < 100 && hot.Snapshot().ShedLevel < 1.99; i++ {
			now = now.Add(admit.DefaultPeriod)
			for j := 0; j < 20; j++ {
				if tk, err := hot.AdmitAt(ctx, now); err == nil {
					tk.DoneAt(now, nil)
				}
			}
			hot.Step(now)
		}
		admitHot := hot.Admit
		if s := hot.Snapshot(); s.ShedLevel < 1.99 {
			fmt.Fprintf(os.Stderr, "backend: admit reached shed level %v only; scripting the overload\n", s.ShedLevel)
			admitHot = func(context.Context) (admit.Ticket, error) {
				return admit.Ticket{}, &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second}
			}
		}
		shed := NewHandler(http.NotFoundHandler(), hot, WithTrust(loopbackOnly))
		shed.admit = func(ctx context.Context) (admit.Ticket, error) {
			stats.add(fmt.Sprintf("overloaded/%d", levee.AttemptFrom(ctx)))
			return admitHot(ctx)
		}
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/overloaded" {
				shed.ServeHTTP(w, r)
				return
			}
			normal.ServeHTTP(w, r)
		})
	case "midtier":
		backend := "http://" + os.Getenv(e2eBackend)
		down := &http.Client{Transport: NewTransport(nil, WithPolicy(retry.Policy{Budget: retry.NewBudget()}), WithHosts("127.0.0.1"))}
		forward := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			stats.add(fmt.Sprintf("%s/%s", strings.TrimPrefix(r.URL.Path, "/"), r.Header.Get(HeaderAttempt)))
			req, _ := http.NewRequestWithContext(r.Context(), "GET", backend+r.URL.Path, nil)
			resp, err := down.Do(req)
			if err != nil {
				// No levee code here: the Handler maps the downstream
				// rejection recorded by the Transport.
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		})
		mux.Handle("/", forward)
		normal := NewHandler(mux, admit.New(), WithTrust(loopbackOnly), WithHealthPaths("/stats"))
		// /shed: the mid-tier itself sheds with a short, retryable overload.
		// It trusts the loopback client, whose Levee-Attempt it counts.
		shed := NewHandler(http.NotFoundHandler(), nil, WithTrust(loopbackOnly))
		shed.admit = func(ctx context.Context) (admit.Ticket, error) {
			stats.add(fmt.Sprintf("shed/%d", levee.AttemptFrom(ctx)))
			return admit.Ticket{}, &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Millisecond}
		}
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/shed" {
				shed.ServeHTTP(w, r)
				return
			}
			normal.ServeHTTP(w, r)
		})
	default:
		fmt.Fprintln(os.Stderr, "unknown role", role)
		return 2
	}
	srv := &http.Server{Handler: h, ConnContext: ConnContext, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(Listener(ln)) }()
	fmt.Printf("ADDR %s\n", ln.Addr())
	// Serve until the parent closes stdin (or dies), at most a minute.
	done := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
	}
	_ = srv.Close()
	return 0
}

// startRole starts this test binary in role and returns its address.
func startRole(t *testing.T, role string, env ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestEndToEndRole$")
	cmd.Env = append(os.Environ(), append(env, e2eRole+"="+role)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "ADDR "); ok {
				addr <- a
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	select {
	case a := <-addr:
		return a
	case <-exited:
		t.Fatalf("%s exited before listening", role)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not listen within 20s", role)
	}
	return ""
}

func fetchStats(t *testing.T, addr string) map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]int{}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestEndToEnd: client (this process) → mid-tier → backend, each in its
// own process over loopback.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two processes")
	}
	backend := startRole(t, "backend")
	mid := startRole(t, "midtier", e2eBackend+"="+backend)

	budget := retry.NewBudget(retry.WithRatio(0.1, 10*time.Second), retry.WithFloor(2, time.Minute))
	client := &http.Client{Transport: NewTransport(nil, WithPolicy(retry.Policy{Budget: budget, Base: 5 * time.Millisecond}), WithHosts("127.0.0.1"))}
	get := func(path string, call levee.Call, budget time.Duration) (*http.Response, error) {
		ctx, cancel := context.WithTimeout(levee.WithCall(context.Background(), call), budget)
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+mid+path, nil)
		return client.Do(req)
	}

	t.Run("criticality, tenant and deadline reach the backend", func(t *testing.T) {
		resp, err := get("/echo", levee.Call{Criticality: levee.SheddablePlus, Tenant: "acme"}, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e echo
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Fatal(err)
		}
		if e.Criticality != "SHEDDABLE_PLUS" || e.Tenant != "acme" || e.Attempt != 0 {
			t.Errorf("backend saw %+v; want SHEDDABLE_PLUS, tenant acme, attempt 0", e)
		}
		if e.LeftMs <= 0 || e.LeftMs > 5000 {
			t.Errorf("backend's deadline %d ms away; want within the client's 5000 ms", e.LeftMs)
		}
		if ms, err := strconv.Atoi(e.HeaderMs); err != nil || ms <= 0 || ms >= 5000 {
			t.Errorf("backend got Levee-Timeout-Ms %q; want below the client's 5000", e.HeaderMs)
		}
	})

	t.Run("backend overload reaches the client as no-retry", func(t *testing.T) {
		_, err := get("/overloaded", levee.Call{Criticality: levee.Sheddable}, 20*time.Second)
		rej := levee.AsRejected(err)
		if rej == nil || rej.Reason != levee.Overloaded || !rej.NoRetry {
			t.Fatalf("client got %v; want overloaded; no-retry", err)
		}
		ms, bs := fetchStats(t, mid), fetchStats(t, backend)
		if ms["overloaded/0"] != 1 || ms["overloaded/1"] != 0 {
			t.Errorf("mid-tier saw attempts %v; want one first attempt and no client retry", ms)
		}
		if n := bs["overloaded/0"] + bs["overloaded/1"] + bs["overloaded/2"]; n < 2 || n > 3 || bs["overloaded/3"] != 0 {
			t.Errorf("backend saw %v; want 2..3 attempts, from the mid-tier only", bs)
		}
	})

	t.Run("client retries stay within its budget", func(t *testing.T) {
		const requests = 30
		throttled := 0
		for i := 0; i < requests; i++ {
			_, err := get("/shed", levee.Call{}, 5*time.Second)
			switch {
			case errors.Is(err, levee.ErrThrottled):
				throttled++ // refused locally: it never reached the mid-tier
			case !errors.Is(err, levee.ErrOverloaded):
				t.Fatalf("request %d: %v; want overloaded or throttled", i, err)
			}
		}
		ms := fetchStats(t, mid)
		retries := ms["shed/1"] + ms["shed/2"]
		// A request counted as throttled may have been refused on its first
		// attempt or on a retry (after its first attempt reached the
		// mid-tier).
		if ms["shed/0"] > requests || ms["shed/0"] < requests-throttled || retries > requests/10+2 {
			t.Errorf("mid-tier saw %d first attempts and %d retries (%d throttled locally); want %d..%d and ≤ %d (10%% + floor 2)",
				ms["shed/0"], retries, throttled, requests-throttled, requests, requests/10+2)
		}
		t.Logf("%d requests: %d reached the mid-tier, %d throttled locally, %d retries", requests, ms["shed/0"], throttled, retries)
		if s := budget.Stats(); int(s.Retries) < retries {
			t.Errorf("budget granted %d retries, mid-tier saw %d", s.Retries, retries)
		}
	})
}
