package leveehttp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
)

// TestRouteNames checks the names the controller's route function sees:
// the ServeMux pattern by default, a route rule's name before it, none
// when turned off, and the same name in the handler's context.
func TestRouteNames(t *testing.T) {
	mux := http.NewServeMux()
	var inHandler string
	serve := func(w http.ResponseWriter, r *http.Request) { inHandler = Route(r.Context()) }
	mux.HandleFunc("GET /items/{id}", serve)
	mux.HandleFunc("/static/", serve)
	cfg := config.Default()
	cfg.HTTP.Routes = []config.Route{{Name: "hot-item", Path: "/items/7"}}
	router := config.NewRouter(cfg)
	tests := []struct {
		name, method, path string
		opts               []HandlerOption
		want               string
	}{
		{"mux pattern", "GET", "/items/42", nil, "GET /items/{id}"},
		{"mux subtree", "GET", "/static/a/b.css", nil, "/static/"},
		{"no match", "GET", "/nothing", nil, ""},
		{"method mismatch", "POST", "/items/42", nil, ""},
		{"rule first", "GET", "/items/7", []HandlerOption{WithRouter(router)}, "hot-item"},
		{"rule misses, mux names", "GET", "/items/8", []HandlerOption{WithRouter(router)}, "GET /items/{id}"},
		{"off", "GET", "/items/42", []HandlerOption{WithRoute(nil)}, ""},
		{"own function", "GET", "/items/42", []HandlerOption{WithRoute(func(*http.Request) string { return "mine" })}, "mine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen []string
			ctl := admit.New(admit.WithRoute(func(ctx context.Context) string {
				seen = append(seen, Route(ctx))
				return Route(ctx)
			}))
			inHandler = "unset"
			h := NewHandler(mux, ctl, append(tt.opts, WithProblemReporter(func(string, string) {}))...)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))
			if len(seen) != 1 || seen[0] != tt.want {
				t.Errorf("controller saw %q, want [%q]", seen, tt.want)
			}
			if inHandler != "unset" && inHandler != tt.want {
				t.Errorf("Route in the handler = %q, want %q", inHandler, tt.want)
			}
		})
	}
}

// TestRouterClassify checks route rules on the request path: the
// criticality and tenant untrusted callers get, trusted callers' headers
// kept, health paths, and a reload followed at once.
func TestRouterClassify(t *testing.T) {
	cfg := config.Default()
	cfg.HTTP.TrustedNetworks = []config.Network{mustNetwork("10.0.0.0/8")}
	cfg.HTTP.Routes = []config.Route{
		{Name: "checkout", Path: "/checkout", Methods: []string{"POST"}, Criticality: "CRITICAL_PLUS"},
		{Name: "partner", Path: "/partner/", Headers: map[string]string{"X-Api-Key": "*"}, TenantHeader: "X-Api-Key"},
		{Name: "batch", Path: "/batch", Criticality: "SHEDDABLE", Tenant: "batch-jobs"},
	}
	router := config.NewRouter(cfg)
	var got levee.Call
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = levee.CallFrom(r.Context()) })
	h := NewHandler(next, admit.New(), WithRouter(router), WithProblemReporter(func(string, string) {}))
	tests := []struct {
		name, method, path, remote string
		header                     map[string]string
		wantCrit                   levee.Criticality
		wantTenant                 string
	}{
		{"rule raises an untrusted caller", "POST", "/checkout", "192.0.2.1:1", nil, levee.CriticalPlus, "192.0.2.0/24"},
		{"untrusted asks less", "POST", "/checkout", "192.0.2.1:1", map[string]string{"Levee-Criticality": "SHEDDABLE_PLUS"}, levee.SheddablePlus, "192.0.2.0/24"},
		{"rule method mismatch", "GET", "/checkout", "192.0.2.1:1", map[string]string{"Levee-Criticality": "CRITICAL_PLUS"}, levee.Critical, "192.0.2.0/24"},
		{"tenant from the rule's header", "GET", "/partner/x", "192.0.2.1:1", map[string]string{"X-Api-Key": "k-123"}, levee.Critical, "k-123"},
		{"fixed tenant, lowered criticality", "GET", "/batch", "192.0.2.1:1", map[string]string{"Levee-Tenant": "forged"}, levee.Sheddable, "batch-jobs"},
		{"trusted keeps its headers", "GET", "/batch", "10.1.2.3:1", map[string]string{"Levee-Criticality": "CRITICAL_PLUS", "Levee-Tenant": "svc-a"}, levee.CriticalPlus, "svc-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got = levee.Call{}
			r := httptest.NewRequest(tt.method, tt.path, nil)
			r.RemoteAddr = tt.remote
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got.Criticality != tt.wantCrit || got.Tenant != tt.wantTenant {
				t.Errorf("call = %v %q, want %v %q", got.Criticality, got.Tenant, tt.wantCrit, tt.wantTenant)
			}
		})
	}

	// Health paths follow the router: exempt even with a spent budget,
	// and after a reload the new list.
	probe := func(path string) int {
		r := httptest.NewRequest("GET", path, nil)
		r.Header.Set("Levee-Timeout-Ms", "0")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	if c := probe("/healthz"); c != 200 {
		t.Errorf("GET /healthz with a spent budget = %d, want 200 (exempt)", c)
	}
	next2 := cfg.Clone()
	next2.HTTP.HealthPaths = []string{"/ping"}
	next2.HTTP.Routes = nil
	router.Apply(next2)
	if c := probe("/healthz"); c != http.StatusGatewayTimeout {
		t.Errorf("after reload GET /healthz = %d, want 504 (no longer exempt)", c)
	}
	if c := probe("/ping"); c != 200 {
		t.Errorf("after reload GET /ping = %d, want 200", c)
	}
	r := httptest.NewRequest("POST", "/checkout", nil)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if got.Criticality != levee.Critical {
		t.Errorf("after reload without rules: criticality %v, want CRITICAL", got.Criticality)
	}
}

// TestResponder checks that a Responder shapes status, headers and body
// while levee's wire headers stay.
func TestResponder(t *testing.T) {
	quota := admit.New(admit.WithQuota("192.0.2.0/24", admit.Quota{Rate: 0.5, Burst: 1}))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	half := func() uint64 { return 1 << 63 } // no jitter
	tests := []struct {
		name        string
		respond     Responder
		timeout     string // Levee-Timeout-Ms
		wantStatus  int
		wantType    string
		wantReject  string
		wantRetryMs string
		wantBody    string
	}{
		{"problem quota", ProblemJSON, "", 429, "application/problem+json", "quota", "{ms}",
			`{"type":"https://levee.dev/problems/quota","title":"Quota exceeded","status":429,"detail":"The tenant is over its quota; retry after {d}.","reject":"quota","retry_after_ms":{ms}}` + "\n"},
		{"problem deadline", ProblemJSON, "0", 504, "application/problem+json", "deadline; no-retry", "",
			`{"type":"https://levee.dev/problems/deadline","title":"Deadline cannot be met","status":504,"detail":"The request's deadline cannot be met; do not retry.","reject":"deadline; no-retry"}` + "\n"},
		{"own status, wire headers restored", func(w http.ResponseWriter, r *http.Request, rej Rejection) {
			w.Header().Del("Levee-Reject")
			w.Header().Del("Retry-After")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":"busy"}`))
		}, "", 503, "application/json", "quota", "{ms}", `{"error":"busy"}`},
		{"writes nothing", func(http.ResponseWriter, *http.Request, Rejection) {}, "", 429, "", "quota", "{ms}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHandler(ok, quota, WithResponder(tt.respond), WithRand(half), WithProblemReporter(func(string, string) {}))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) // the quota's burst
			r := httptest.NewRequest("GET", "/", nil)
			if tt.timeout != "" {
				r.Header.Set("Levee-Timeout-Ms", tt.timeout)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			hd := w.Header()
			// The quota's delay depends on the time between the two
			// requests: the body must say what the headers say.
			ms := hd.Get("Levee-Retry-After-Ms")
			if n, err := strconv.Atoi(ms); err == nil && (n < 1000 || n > 3000) {
				t.Errorf("Levee-Retry-After-Ms = %d, want the quota's ~2s", n)
			} else if err == nil {
				d := time.Duration(n) * time.Millisecond
				tt.wantRetryMs = strings.ReplaceAll(tt.wantRetryMs, "{ms}", ms)
				tt.wantBody = strings.NewReplacer("{ms}", ms, "{d}", d.String()).Replace(tt.wantBody)
			}
			if w.Code != tt.wantStatus || hd.Get("Content-Type") != tt.wantType || hd.Get("Levee-Reject") != tt.wantReject ||
				hd.Get("Levee-Retry-After-Ms") != tt.wantRetryMs || w.Body.String() != tt.wantBody {
				t.Errorf("got %d %q reject=%q retry-ms=%q body %q\nwant %d %q reject=%q retry-ms=%q body %q",
					w.Code, hd.Get("Content-Type"), hd.Get("Levee-Reject"), hd.Get("Levee-Retry-After-Ms"), w.Body.String(),
					tt.wantStatus, tt.wantType, tt.wantReject, tt.wantRetryMs, tt.wantBody)
			}
			if n, err := strconv.Atoi(ms); err == nil && hd.Get("Retry-After") != strconv.Itoa((n+999)/1000) {
				t.Errorf("Retry-After = %q, want %d", hd.Get("Retry-After"), (n+999)/1000)
			}
			if strings.HasPrefix(tt.wantType, "application/problem+json") {
				var doc map[string]any
				if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
					t.Errorf("problem document does not parse: %v", err)
				}
			}
		})
	}

	// Error writes a downstream rejection through the Handler's Responder.
	var code int
	var ctype string
	mid := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second})
	}), admit.New(), WithResponder(ProblemJSON), WithProblemReporter(func(string, string) {}))
	w := httptest.NewRecorder()
	mid.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	code, ctype = w.Code, w.Header().Get("Content-Type")
	if code != 503 || ctype != "application/problem+json" || w.Header().Get("Levee-Reject") != "overloaded; no-retry" {
		t.Errorf("Error under ProblemJSON: %d %q %q, want 503 problem+json \"overloaded; no-retry\"", code, ctype, w.Header().Get("Levee-Reject"))
	}
}
