package leveeprom

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// healthy sends n requests of criticality c through t, all accepted.
func healthy(t *throttle.Throttle, c levee.Criticality, n int) {
	for i := range n {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		if t.AllowAt(now, c) == nil {
			t.DoneAt(now, c, true)
		}
	}
}

func TestThrottleCollectorGolden(t *testing.T) {
	api := throttle.New(throttle.WithSeed(1))
	healthy(api, levee.Critical, 10)
	healthy(api, levee.Sheddable, 3)
	g := throttle.NewGroup(throttle.WithSeed(2))
	healthy(g.Get("db"), levee.CriticalPlus, 5)
	healthy(g.Get("api"), levee.CriticalPlus, 100) // shadowed by Add("api", …)

	c := NewThrottleCollector()
	c.Add("api", api)
	c.AddGroup(g)
	c.AddGroup(nil)
	c.Add("gone", throttle.New())
	c.Add("gone", nil)
	golden(t, c, "throttle.prom")
}

// TestThrottleCollectorOverload checks the exported values against Stats
// for a backend that rejects most requests, whatever the throttle's exact
// numbers.
func TestThrottleCollectorOverload(t *testing.T) {
	th := throttle.New(throttle.WithSeed(3))
	for i := range 2000 {
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		if th.AllowAt(now, levee.Sheddable) == nil {
			th.DoneAt(now, levee.Sheddable, i%10 == 0) // the backend accepts ~10%
		}
	}
	th.RejectProbabilityAt(t0.Add(20*time.Second), levee.Sheddable)
	s := th.Stats()
	if s.Rejected[levee.Sheddable] == 0 {
		t.Fatalf("scenario: no local rejections (stats %+v)", s)
	}
	c := NewThrottleCollector()
	c.Add("search", th)
	for _, tt := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"requests", nil, float64(s.Requests[levee.Sheddable])},
		{"accepts", nil, float64(s.Accepts[levee.Sheddable])},
		{"rejections", nil, float64(s.Rejected[levee.Sheddable])},
		{"probability", nil, s.Probability[levee.Sheddable]},
	} {
		name := "levee_throttle_" + tt.name + "_total"
		if tt.name == "probability" {
			name = "levee_throttle_reject_probability"
		}
		if got := valueOf(t, c, name, map[string]string{"backend": "search", "criticality": "SHEDDABLE"}); got != tt.want {
			t.Errorf("%s = %v, want %v (from Stats)", name, got, tt.want)
		}
	}
}

func TestBudgetCollector(t *testing.T) {
	fresh := NewBudgetCollector(retry.NewBudget(), WithConstLabels(prometheus.Labels{"budget": "fresh"}))
	golden(t, fresh, "budget_fresh.prom")

	b := retry.NewBudget(retry.WithRatio(0.1, 10*time.Second), retry.WithFloor(1, time.Minute))
	for i := range 20 {
		b.RequestAt(t0.Add(time.Duration(i) * time.Millisecond))
	}
	for range 5 {
		b.TryRetryAt(t0.Add(time.Second))
	}
	s := b.Stats()
	if s.Refused == 0 || s.Retries == 0 {
		t.Fatalf("scenario: want some retries granted and some denied, got %+v", s)
	}
	c := NewBudgetCollector(b)
	for name, want := range map[string]uint64{
		"levee_retry_budget_requests_total": s.Requests,
		"levee_retries_total":               s.Retries,
		"levee_retries_denied_total":        s.Refused,
	} {
		if got := valueOf(t, c, name, nil); got != float64(want) {
			t.Errorf("%s = %v, want %v (from Stats)", name, got, want)
		}
	}
	if NewBudgetCollector(nil).b != retry.DefaultBudget() {
		t.Error("NewBudgetCollector(nil) does not export the default budget")
	}
}

func TestClientCollectorsLint(t *testing.T) {
	tc := NewThrottleCollector()
	tc.Add("api", throttle.New())
	for _, c := range []prometheus.Collector{tc, NewBudgetCollector(retry.NewBudget())} {
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Errorf("lint %s: %s", p.Metric, p.Text)
		}
	}
}

// valueOf returns the value of the one sample of name whose labels include
// labels.
func valueOf(t *testing.T, c prometheus.Collector, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no sample %s%v", name, labels)
	return 0
}

// TestThrottleCollectorBadKeys: keys that are not valid label values (a
// host with invalid UTF-8 bytes, a very long one) never make a scrape
// fail; they are exported bounded, valid and apart.
func TestThrottleCollectorBadKeys(t *testing.T) {
	g := throttle.NewGroup()
	long := strings.Repeat("é", 200)
	bad := []string{"\xff\xfe", "a\xffb", "a\xfeb", long, long + "x", "ok.example:443"}
	for _, k := range bad {
		healthy(g.Get(k), levee.Critical, 3)
	}
	c := NewThrottleCollector()
	c.AddGroup(g)
	c.Add("\xc3", throttle.New())
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics answered %d: %s", resp.StatusCode, body)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "levee_throttle_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "backend" {
					continue
				}
				v := l.GetValue()
				if !utf8.ValidString(v) || len(v) > 128 {
					t.Errorf("label %q: not valid UTF-8 or longer than %d", v, 128)
				}
				backends[v] = true
			}
		}
	}
	if len(backends) != len(bad)+1 {
		t.Errorf("%d backends exported, want %d (every key apart): %v", len(backends), len(bad)+1, backends)
	}
	if !backends["ok.example:443"] {
		t.Error("a valid key was not exported as it is")
	}
}
