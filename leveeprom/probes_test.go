package leveeprom_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/leveeprom"
)

func TestProbeCollector(t *testing.T) {
	h := leveehttp.NewHandler(http.NotFoundHandler(), admit.New())
	reg := prometheus.NewRegistry()
	reg.MustRegister(leveeprom.NewProbeCollector(h.Probes, leveeprom.WithConstLabels(prometheus.Labels{"server": "api"})))
	for _, m := range []string{"GET", "HEAD", "POST"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(m, "/healthz", nil))
	}
	want := `
# HELP levee_health_probes_total Health and readiness requests passed through without admission (never shed).
# TYPE levee_health_probes_total counter
levee_health_probes_total{server="api"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "levee_health_probes_total"); err != nil {
		t.Error(err)
	}
}

func TestConnCollector(t *testing.T) {
	var n uint64 = 3
	reg := prometheus.NewRegistry()
	reg.MustRegister(leveeprom.NewConnCollector(func() uint64 { return n }))
	want := `
# HELP levee_connections_gone_total Connections closed unread at accept: their peer had closed them while they waited in the accept queue.
# TYPE levee_connections_gone_total counter
levee_connections_gone_total 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "levee_connections_gone_total"); err != nil {
		t.Error(err)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewConnCollector(nil) did not panic")
		}
	}()
	leveeprom.NewConnCollector(nil)
}
