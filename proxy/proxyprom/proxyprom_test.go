package proxyprom_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-dev/levee/proxy"
	"github.com/levee-dev/levee/proxy/proxyprom"
)

type okBackend struct{}

func (okBackend) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
}

func TestCollector(t *testing.T) {
	cfg := proxy.DefaultConfig()
	cfg.Backends.Static = []proxy.Endpoint{{Address: "10.0.0.1:80"}, {Address: "10.0.0.2:80"}}
	h, err := proxy.New(cfg, proxy.WithTransport(func(string) http.RoundTripper { return okBackend{} }),
		proxy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/x", nil))
	}
	c := proxyprom.NewCollector(h)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", err, problems)
	}
	want := `
# HELP levee_proxy_requests_total Requests answered, by route and status class (1xx..5xx; none when the caller left first).
# TYPE levee_proxy_requests_total counter
levee_proxy_requests_total{class="2xx",route="default"} 3
# HELP levee_proxy_backend_limit The backend's adaptive concurrency limit.
# TYPE levee_proxy_backend_limit gauge
levee_proxy_backend_limit{backend="10.0.0.1:80"} 20
levee_proxy_backend_limit{backend="10.0.0.2:80"} 20
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "levee_proxy_requests_total", "levee_proxy_backend_limit"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "levee_proxy_backend_attempts_total"); n != 8 {
		t.Errorf("%d attempt series, want 8 (2 backends × 4 outcomes)", n)
	}
}
