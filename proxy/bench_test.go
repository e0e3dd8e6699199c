package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkPick is the balancer's request path: two random choices, a
// slot taken and released. No lock, no allocation.
func BenchmarkPick(b *testing.B) {
	bl, set := fullBalancer(16, 1<<30)
	for _, x := range set {
		x.inflight.Store(0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			x := bl.pick(exclude{})
			if x == nil {
				b.Fatal("no backend")
			}
			bl.release(x)
		}
	})
}

// canned answers every request at once from memory.
type canned struct{}

func (canned) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/plain"}},
		Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: r}, nil
}

// BenchmarkServe compares, in one run, the CPU of one request through a
// bare httputil.ReverseProxy (as configured by default, and with the copy
// buffers pooled as the levee proxy pools them) and through the levee proxy (edge admission
// without a controller, balancing over three backends, throttle, retry
// budget, limits), both over an in-memory transport: the difference is
// what the proxy adds per request, the network aside.
func BenchmarkServe(b *testing.B) {
	bare := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "a.test:80"})
			pr.SetXForwarded()
		},
		Transport: canned{},
	}
	pooled := &httputil.ReverseProxy{Rewrite: bare.Rewrite, Transport: canned{}, BufferPool: bufferPool{}}
	cfg := DefaultConfig()
	cfg.Backends.Static = []Endpoint{{Address: "a.test:80"}, {Address: "b.test:80"}, {Address: "c.test:80"}}
	lv, err := New(cfg, WithTransport(func(string) http.RoundTripper { return canned{} }),
		WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", bare}, {"bare-pooled", pooled}, {"levee", lv}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				req := httptest.NewRequest("GET", "/x", nil)
				for pb.Next() {
					rec := httptest.NewRecorder()
					c.h.ServeHTTP(rec, req)
					if rec.Code != 200 {
						b.Fatalf("status %d", rec.Code)
					}
				}
			})
		})
	}
}
