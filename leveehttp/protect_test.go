package leveehttp

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/pressure"
)

var quiet = slog.New(slog.DiscardHandler)

// serveProtected protects h with opts (quiet, defaults without the
// environment first) and serves it on a loopback port: the base URL, and
// the channel Serve's error arrives on.
func serveProtected(t *testing.T, ctx context.Context, h http.Handler, opts ...ProtectOption) (*Protected, string, chan error) {
	t.Helper()
	p, err := Protect(ctx, h, append([]ProtectOption{WithLogger(quiet), WithConfig(config.Default(), config.WithEnv(nil))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(ln) }()
	return p, "http://" + ln.Addr().String(), served
}

// protectLoopback is serveProtected with Close at cleanup.
func protectLoopback(t *testing.T, ctx context.Context, h http.Handler, opts ...ProtectOption) (*Protected, string) {
	t.Helper()
	p, base, served := serveProtected(t, ctx, h, opts...)
	t.Cleanup(func() {
		p.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return p, base
}

// leveeGoroutines returns the stacks of goroutines running levee code
// other than tests.
func leveeGoroutines() []string {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "levee-dev/levee") && !strings.Contains(g, "_test.go") {
			out = append(out, g)
		}
	}
	return out
}

// waitNoGoroutines fails unless every levee goroutine has ended within a
// few seconds (the run queue and reapers end on their own timers).
func waitNoGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := leveeGoroutines()
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d levee goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func get(t *testing.T, url string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// TestProtectServesAndCloses checks what one call gives: the application,
// its own pages outside admission, the route names, and that Close and
// the end of ctx leave no goroutine behind.
func TestProtectServesAndCloses(t *testing.T) {
	for _, stop := range []string{"Close", "ctx"} {
		t.Run(stop, func(t *testing.T) {
			waitNoGoroutines(t) // from earlier tests
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			mux := http.NewServeMux()
			var route string
			mux.HandleFunc("GET /items/{id}", func(w http.ResponseWriter, r *http.Request) {
				route = Route(r.Context())
				fmt.Fprint(w, "item ", r.PathValue("id"))
			})
			p, base, served := serveProtected(t, ctx, mux)

			// An expired budget is refused for the application, never for
			// levee's own pages or probes.
			for _, tc := range []struct {
				path     string
				want     int
				contains string
			}{
				{"/items/7", 200, "item 7"},
				{"/levee/status", 200, "<html"},
				{"/levee/status.json", 200, `"current"`},
				{"/levee/status.json", 200, `"overload":{"time"`},
				{"/metrics", 200, "levee_admissions_total"},
				{"/metrics", 200, "levee_overload_level 0"},
				{"/healthz", 404, ""},
			} {
				code, body, _ := get(t, base+tc.path, "Levee-Timeout-Ms", "0")
				want := tc.want
				if tc.path == "/items/7" {
					want = http.StatusGatewayTimeout
				}
				if code != want {
					t.Errorf("GET %s with a spent budget = %d, want %d", tc.path, code, want)
				}
				code, body, _ = get(t, base+tc.path)
				if code != tc.want || !strings.Contains(body, tc.contains) {
					t.Errorf("GET %s = %d %.60q, want %d containing %q", tc.path, code, body, tc.want, tc.contains)
				}
			}
			if route != "GET /items/{id}" {
				t.Errorf("route name %q, want the ServeMux pattern", route)
			}
			if ps := p.Problems(); len(ps) != 0 {
				t.Errorf("problems %v, want none", ps)
			}
			http.DefaultClient.CloseIdleConnections()
			if stop == "Close" {
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			} else {
				cancel()
			}
			select {
			case err := <-served:
				if err != http.ErrServerClosed {
					t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Serve did not return")
			}
			if stop == "ctx" {
				p.Close() // waits for the loops the end of ctx stopped
			}
			waitNoGoroutines(t)
		})
	}
}

// TestStatusPollThenRequest is the sequence that used to end in a 504: a
// status poll on a keep-alive connection, a pause longer than the next
// request's budget, then that request on the same connection.
func TestStatusPollThenRequest(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	_, base := protectLoopback(t, context.Background(), ok)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	send := func(path, extra string) int {
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", path, extra)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := send("/levee/status.json", ""); c != 200 {
		t.Fatalf("status poll = %d", c)
	}
	time.Sleep(300 * time.Millisecond)
	if c := send("/api", "Levee-Timeout-Ms: 200\r\n"); c != 200 {
		t.Errorf("request after a status poll and a pause = %d, want 200", c)
	}
}

// TestProtectProblems checks the misuse reported once at start and on
// the first request: log and metric.
func TestProtectProblems(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(http.ResponseWriter, *http.Request) {})
	cfg := config.Default()
	cfg.HTTP.TrustedNetworks = []config.Network{mustNetwork("0.0.0.0/0")}
	var logged strings.Builder
	p, err := Protect(context.Background(), mux, WithConfig(cfg, config.WithEnv(nil)),
		WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	// Served by a server of the application's own, without Listener.
	srv := &http.Server{Handler: p}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()
	get(t, base+"/a")
	get(t, base+"/b")
	want := []string{ProblemNoArrivalStamps, ProblemShadowedPath, ProblemTrustEveryone}
	if got := p.Problems(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("problems %v, want %v", got, want)
	}
	_, metrics, _ := get(t, base+"/metrics")
	for _, w := range want {
		if line := `levee_setup_problem{problem="` + w + `"} 1`; !strings.Contains(metrics, line) {
			t.Errorf("metrics lack %s", line)
		}
	}
	if n := strings.Count(logged.String(), "problem=no_arrival_stamps"); n != 1 {
		t.Errorf("no_arrival_stamps logged %d times, want once:\n%s", n, logged.String())
	}
}

// TestProtectConfigFile checks that Protect follows its file: route
// rules, health paths and the load header change with a reload, and the
// admin endpoint is served when enabled.
func TestProtectConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "levee.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`version: 1
http:
  health_paths: [/ping]
  routes:
    - {name: batch, path: /batch, criticality: SHEDDABLE}
admin: {enabled: true, token: "0123456789abcdef-token"}
`)
	var crit string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		crit = criticalityOf(r)
	})
	p, err := Protect(context.Background(), h, WithLogger(quiet), WithConfigFile(path, config.WithEnv(nil)))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.Serve(ln)
	defer p.Close()
	base := "http://" + ln.Addr().String()
	get(t, base+"/batch")
	if crit != "SHEDDABLE" {
		t.Errorf("route rule: criticality %s, want SHEDDABLE", crit)
	}
	if code, _, _ := get(t, base+"/ping", "Levee-Timeout-Ms", "0"); code != 200 {
		t.Errorf("health path /ping = %d, want 200", code)
	}
	if code, _, _ := get(t, base+"/levee/admin/config"); code != http.StatusUnauthorized {
		t.Errorf("admin without token = %d, want 401", code)
	}
	if code, _, _ := get(t, base+"/levee/admin/config", "Authorization", "Bearer 0123456789abcdef-token"); code != 200 {
		t.Errorf("admin with token = %d, want 200", code)
	}
	write(`version: 1
http:
  health_paths: [/healthz]
  load_header: true
admin: {enabled: true, token: "0123456789abcdef-token"}
`)
	if res := p.Reloader().Reload(); res.Err != nil {
		t.Fatalf("reload: %v", res.Err)
	}
	_, _, hdr := get(t, base+"/batch")
	if crit != "CRITICAL" || hdr.Get("Levee-Load") == "" {
		t.Errorf("after reload: criticality %s, Levee-Load %q; want CRITICAL and a load header", crit, hdr.Get("Levee-Load"))
	}
	if code, _, _ := get(t, base+"/ping", "Levee-Timeout-Ms", "0"); code != http.StatusGatewayTimeout {
		t.Errorf("after reload /ping = %d, want 504 (no longer a health path)", code)
	}
}

func criticalityOf(r *http.Request) string {
	return levee.CallFrom(r.Context()).Criticality.String()
}

// TestUnfedConcurrency: a Handler whose controller steers by a
// concurrency signal it does not feed says so once; fed, or with no such
// signal, it says nothing.
func TestUnfedConcurrency(t *testing.T) {
	conc := pressure.NewConcurrency()
	tests := []struct {
		name string
		ctl  *admit.Controller
		opts []HandlerOption
		want bool
	}{
		{"a concurrency signal, not fed", admit.New(admit.WithSignals(conc)), nil, true},
		{"fed", admit.New(admit.WithSignals(conc)), []HandlerOption{WithConcurrency(conc)}, false},
		{"no concurrency signal", admit.New(admit.WithSignals(pressure.NewQueueDelay())), nil, false},
		{"no controller", nil, nil, false},
	}
	for _, tt := range tests {
		var got []string
		opts := append(tt.opts, WithProblemReporter(func(p, _ string) {
			if p == ProblemUnfedConcurrency {
				got = append(got, p)
			}
		}))
		h := NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), tt.ctl, opts...)
		for range 3 {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
		}
		if want := map[bool]int{true: 1, false: 0}[tt.want]; len(got) != want {
			t.Errorf("%s: reported %d times; want %d", tt.name, len(got), want)
		}
	}
}
