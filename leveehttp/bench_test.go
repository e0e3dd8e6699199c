package leveehttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
	"github.com/levee-dev/levee/retry"
)

// nopWriter is a ResponseWriter that keeps nothing, so that benchmarks
// measure the handler, not a recorder.
type nopWriter struct {
	h    http.Header
	code int
}

func (w *nopWriter) Header() http.Header         { return w.h }
func (w *nopWriter) WriteHeader(c int)           { w.code = c }
func (w *nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *nopWriter) reset()                      { clear(w.h); w.code = 0 }

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })

type benchCase struct {
	name string
	h    http.Handler
	req  func() *http.Request
}

func benchCases() []benchCase {
	plain := func() *http.Request {
		r := httptest.NewRequest("GET", "/api", nil)
		r.RemoteAddr = "192.0.2.7:5555"
		return r
	}
	headers := func() *http.Request {
		r := plain()
		r.Header.Set("Levee-Criticality", "SHEDDABLE_PLUS")
		r.Header.Set("Levee-Tenant", "acme")
		r.Header.Set("Levee-Timeout-Ms", "5000")
		r.Header.Set("Levee-Attempt", "0")
		return r
	}
	trust := WithTrust(func(*http.Request) bool { return true })
	// A quota of one request in ~30 years: everything after the first is
	// rejected by the real controller with Reason Quota.
	quota := admit.New(admit.WithQuota("192.0.2.0/24", admit.Quota{Rate: 1e-9, Burst: 1}))
	mux := http.NewServeMux()
	mux.Handle("GET /api", okHandler)
	// The route function as Protect gives it to the controller.
	routed := admit.New(admit.WithRoute(Route))
	rcfg := config.Default()
	rcfg.HTTP.TrustedNetworks = []config.Network{mustNetwork("10.0.0.0/8")}
	rcfg.HTTP.Routes = []config.Route{
		{Name: "checkout", Path: "/checkout", Methods: []string{"POST"}, Criticality: "CRITICAL_PLUS"},
		{Name: "partner", Path: "/partner/", Headers: map[string]string{"X-Api-Key": "*"}, TenantHeader: "X-Api-Key"},
		{Name: "api", Path: "/api", Criticality: "SHEDDABLE_PLUS"},
	}
	router := config.NewRouter(rcfg)
	return []benchCase{
		{"accept-overload", NewHandler(okHandler, admit.New(), WithOverload(benchOverload(0.5))), plain},
		{"accept-overload-elevated", NewHandler(okHandler, admit.New(), WithOverload(benchOverload(0.93))), plain},
		{"reject-overload", NewHandler(okHandler, admit.New(), WithOverload(benchOverload(0.99))), plain},
		{"bare", okHandler, plain},
		{"accept-mux", NewHandler(mux, routed), plain},
		{"accept-signals", NewHandler(okHandler, admit.New(), WithQueueDelay(pressure.NewQueueDelay()), WithConcurrency(pressure.NewConcurrency())), plain},
		{"accept-router", NewHandler(okHandler, routed, WithRouter(router)), headers},
		{"accept", NewHandler(okHandler, admit.New()), plain},
		{"accept-headers", NewHandler(okHandler, admit.New(), trust), headers},
		{"reject-quota", NewHandler(okHandler, quota), plain},
		{"reject-expired", NewHandler(okHandler, admit.New()), func() *http.Request {
			r := plain()
			r.Header.Set("Levee-Timeout-Ms", "0")
			return r
		}},
	}
}

// benchOverload returns an Overload whose manager has stepped once with
// its memory resource reading v (0.5 normal: no gate; 0.93 elevated:
// large bodies refused, the request passes the gate; 0.99 critical: only
// CRITICAL_PLUS passes), its state lasting 30 s (a 10 s period).
func benchOverload(v float64) *Overload {
	m := overload.New(overload.WithPeriod(10*time.Second), overload.WithResources(
		overload.MemoryResource(func() overload.Reading { return overload.Reading{Value: v} })))
	m.Step(time.Now())
	return NewOverload(m)
}

// BenchmarkHandler measures one request through NewHandler with a real
// admit.Controller against the bare next handler ("bare") in the same run:
// accept (no headers: peer-prefix tenant), accept-headers (trusted
// criticality, tenant, timeout and attempt: adds a context deadline), and
// the two cheapest rejections (a tenant over quota, an expired budget);
// with the overload manager's gate (WithOverload): accept-overload (no
// action concerns requests), accept-overload-elevated (the gate checks
// the request and lets it through), reject-overload (the last level
// refuses it).
func BenchmarkHandler(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name, func(b *testing.B) {
			r := bc.req()
			w := &nopWriter{h: http.Header{}}
			bc.h.ServeHTTP(w, r) // warm up: quota burst, load cache
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				w.reset()
				bc.h.ServeHTTP(w, r)
			}
		})
		b.Run(bc.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := bc.req()
				w := &nopWriter{h: http.Header{}}
				for pb.Next() {
					w.reset()
					bc.h.ServeHTTP(w, r)
				}
			})
		})
	}
}

// TestHandlerAllocs pins the allocations BenchmarkHandler reports, so that a
// regression fails a test: accept = the levee.Call context node (2), the
// request's state (1) and the shallow request copy (1); a timeout header
// adds the deadline context and its timer; a controller rejection adds the
// Retry-After values (2) to the levee.Call context (2); an expired budget
// allocates nothing.
func TestHandlerAllocs(t *testing.T) {
	want := map[string]float64{
		"accept-overload":          3, // as accept (measured 3)
		"accept-overload-elevated": 3,
		"reject-overload":          2, // the Retry-After values: refused before the context is built
		"bare":                     0,
		"accept-mux":               3,
		"accept-signals":           3,
		"accept-router":            7,
		"accept":                   4,
		"accept-headers":           8,
		"reject-quota":             4,
		"reject-expired":           0,
	}
	for _, bc := range benchCases() {
		r := bc.req()
		w := &nopWriter{h: http.Header{}}
		bc.h.ServeHTTP(w, r)
		got := testing.AllocsPerRun(200, func() {
			w.reset()
			bc.h.ServeHTTP(w, r)
		})
		if got > want[bc.name] {
			t.Errorf("%s: %v allocs per request; want ≤ %v", bc.name, got, want[bc.name])
		}
		t.Logf("%s: %v allocs, status %d", bc.name, got, w.code)
	}
}

// staticRT answers every request with the same empty 200 response.
type staticRT struct{ resp http.Response }

func (s *staticRT) RoundTrip(*http.Request) (*http.Response, error) {
	r := s.resp
	r.Body = http.NoBody
	return &r, nil
}

// BenchmarkTransport measures the client side against a RoundTripper that
// answers at once: "bare" calls it directly, "levee" goes through
// NewTransport (context deadline, throttle, budget, header propagation,
// request clone).
func BenchmarkTransport(b *testing.B) {
	next := &staticRT{resp: http.Response{StatusCode: 200, Header: http.Header{}}}
	ctx := levee.WithCall(context.Background(), levee.Call{Criticality: levee.SheddablePlus, Tenant: "acme"})
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://backend/x", nil)
	for _, bc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"bare", next},
		{"levee", NewTransport(next, WithPolicy(retry.Policy{Budget: retry.NewBudget()}))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := bc.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

// BenchmarkHandlerLoopback sends real requests over one keep-alive loopback
// connection to a server without and with levee (NewHandler with a real
// controller, Listener and ConnContext), so that levee's cost is seen next
// to that of net/http itself. Allocations count client and server.
func BenchmarkHandlerLoopback(b *testing.B) {
	for _, bc := range []struct {
		name            string
		levee, listener bool
	}{{"bare", false, false}, {"levee", true, false}, {"levee-listener", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			var h http.Handler = okHandler
			srv := httptest.NewUnstartedServer(h)
			if bc.levee {
				srv.Config.Handler = NewHandler(okHandler, admit.New())
			}
			if bc.listener {
				srv.Listener = Listener(srv.Listener)
				srv.Config.ConnContext = ConnContext
			}
			srv.Start()
			defer srv.Close()
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			req, _ := http.NewRequest("GET", srv.URL+"/api", nil)
			req.Header.Set("Levee-Timeout-Ms", "5000")
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}

func mustNetwork(s string) config.Network {
	n, err := config.ParseNetwork(s)
	if err != nil {
		panic(err)
	}
	return n
}
