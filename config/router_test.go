package config

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/levee-dev/levee"
)

const routerFile = `version: 1
http:
  health_paths: [/healthz, /ping]
  trusted_networks: [10.0.0.0/8, "2001:db8::/32"]
  routes:
    - name: checkout
      path: /api/checkout
      methods: [POST]
      criticality: CRITICAL_PLUS
    - name: partner
      path: /api/
      headers: {X-Api-Key: "*"}
      tenant_header: X-Api-Key
      criticality: SHEDDABLE_PLUS
    - name: batch
      path: /batch/
      networks: [192.0.2.0/24]
      tenant: batch-jobs
      criticality: SHEDDABLE
    - name: mobile
      headers: {X-Client: mobile}
`

func newRouter(t testing.TB) *Router {
	t.Helper()
	cfg, err := Parse("f.yaml", []byte(routerFile), WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	return NewRouter(cfg)
}

func TestRouterClassify(t *testing.T) {
	r := newRouter(t)
	req := func(method, target, remote string, h map[string]string) *http.Request {
		q := httptest.NewRequest(method, target, nil)
		q.RemoteAddr = remote
		for k, v := range h {
			q.Header.Set(k, v)
		}
		return q
	}
	for _, tc := range []struct {
		name string
		req  *http.Request
		want Class
	}{
		{"exact path and method", req("POST", "/api/checkout", "1.2.3.4:5", nil), Class{Route: "checkout", Criticality: levee.CriticalPlus, HasCriticality: true}},
		{"method mismatch falls through", req("GET", "/api/checkout", "1.2.3.4:5", nil), Class{}},
		{"subtree with header tenant", req("GET", "/api/x", "1.2.3.4:5", map[string]string{"X-Api-Key": "k-42"}), Class{Route: "partner", Criticality: levee.SheddablePlus, HasCriticality: true, Tenant: "k-42"}},
		{"subtree without the header", req("GET", "/api/x", "1.2.3.4:5", nil), Class{}},
		{"network match", req("GET", "/batch/run", "192.0.2.9:1", nil), Class{Route: "batch", Criticality: levee.Sheddable, HasCriticality: true, Tenant: "batch-jobs"}},
		{"network mismatch", req("GET", "/batch/run", "198.51.100.1:1", nil), Class{}},
		{"IPv4-mapped address", req("GET", "/batch/run", "[::ffff:192.0.2.9]:1", nil), Class{Route: "batch", Criticality: levee.Sheddable, HasCriticality: true, Tenant: "batch-jobs"}},
		{"header value", req("GET", "/x", "1.2.3.4:5", map[string]string{"X-Client": "mobile"}), Class{Route: "mobile"}},
		{"header value mismatch", req("GET", "/x", "1.2.3.4:5", map[string]string{"X-Client": "web"}), Class{}},
	} {
		if got := r.Classify(tc.req); got != tc.want {
			t.Errorf("%s: Classify = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"10.1.2.3:80", true}, {"11.1.2.3:80", false}, {"[2001:db8::1]:80", true},
		{"[::ffff:10.0.0.1]:80", true}, {"unix", false}, {"", false},
	} {
		if got := r.Trusted(req("GET", "/", tc.remote, nil)); got != tc.want {
			t.Errorf("Trusted(%q) = %v, want %v", tc.remote, got, tc.want)
		}
	}
	for p, want := range map[string]bool{"/healthz": true, "/ping": true, "/livez": false, "/healthz/": false} {
		if got := r.Health(p); got != want {
			t.Errorf("Health(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestClassFor(t *testing.T) {
	rule := Class{Criticality: levee.SheddablePlus, HasCriticality: true}
	for _, tc := range []struct {
		name  string
		class Class
		asked levee.Criticality
		has   bool
		want  levee.Criticality
	}{
		{"no rule, nothing asked", Class{}, 0, false, levee.Critical},
		{"no rule, asks to be shed first", Class{}, levee.Sheddable, true, levee.Sheddable},
		{"no rule, asks to rise", Class{}, levee.CriticalPlus, true, levee.Critical},
		{"rule, nothing asked", rule, 0, false, levee.SheddablePlus},
		{"rule, asks for less", rule, levee.Sheddable, true, levee.Sheddable},
		{"rule, asks for more", rule, levee.CriticalPlus, true, levee.SheddablePlus},
		{"rule raises, caller asks nothing", Class{Criticality: levee.CriticalPlus, HasCriticality: true}, 0, false, levee.CriticalPlus},
	} {
		if got := tc.class.For(tc.asked, tc.has); got != tc.want {
			t.Errorf("%s: For = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRouterFollowsReload(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte(routerFile), WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	rl, err := NewReloader(cfg, WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	r := NewRouter(rl.Current())
	if err := rl.Subscribe(r); err != nil {
		t.Fatal(err)
	}
	q := httptest.NewRequest("GET", "/x", nil)
	q.RemoteAddr = "203.0.113.5:1"
	if r.Trusted(q) {
		t.Fatal("trusted before the change")
	}
	if res := rl.SetOverride("http.trusted_networks", "203.0.113.0/24"); !res.Applied {
		t.Fatal(res.Err)
	}
	if !r.Trusted(q) {
		t.Error("not trusted after the trusted networks changed")
	}
}

func BenchmarkClassify(b *testing.B) {
	r := newRouter(b)
	q := httptest.NewRequest("GET", "/batch/run", nil)
	q.RemoteAddr = "192.0.2.9:1234"
	q.Header.Set("X-Api-Key", "k-42")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if c := r.Classify(q); c.Route != "batch" {
				b.Fatal(c)
			}
			if r.Trusted(q) || r.Health(q.URL.Path) {
				b.Fatal("trusted or health")
			}
		}
	})
}
