package leveehttp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
)

const adminToken = "0123456789abcdef-admin"

const adminFile = `version: 1
reload:
  poll: 0s
admin:
  enabled: true
  token: ` + adminToken + `
  max_drill: 10m
signals:
  cpu:
    target: 0.9
`

// fakeShed is a ShedForcer that records the drill.
type fakeShed struct {
	mu    sync.Mutex
	level float64
	until time.Time
}

func (f *fakeShed) ForceShed(l float64, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.level, f.until = l, until
}

func (f *fakeShed) ForcedShed(now time.Time) (float64, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until.IsZero() || !now.Before(f.until) || f.level <= 0 {
		return 0, time.Time{}, false
	}
	return f.level, f.until, true
}

type adminFixture struct {
	path  string
	rl    *config.Reloader
	deg   *degrade.Controller
	shed  *fakeShed
	admin *Admin
}

func newAdminFixture(t *testing.T, file string, opts ...AdminOption) *adminFixture {
	t.Helper()
	f := &adminFixture{path: filepath.Join(t.TempDir(), "levee.yaml"), deg: degrade.New(), shed: &fakeShed{}}
	if err := os.WriteFile(f.path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	rl, err := config.Open(f.path, config.WithEnv(nil), config.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	f.rl = rl
	opts = append([]AdminOption{WithAdminDegrade(f.deg), WithAdminShed(f.shed), WithAdminLogger(slog.New(slog.DiscardHandler))}, opts...)
	f.admin = NewAdmin(rl, opts...)
	return f
}

// do sends one request to the admin endpoint and decodes the JSON answer.
func (f *adminFixture) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.admin.ServeHTTP(w, r)
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatalf("%s %s: answer %q is not JSON: %v", method, path, w.Body.String(), err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return w.Code, doc
}

// TestAdminUnauthorized checks that without the token every request is
// answered 401 and changes nothing.
func TestAdminUnauthorized(t *testing.T) {
	f := newAdminFixture(t, adminFile)
	if err := os.WriteFile(f.path, []byte(strings.Replace(adminFile, "target: 0.9", "target: 0.8", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, body string
		header             string
	}{
		{"GET", "/levee/admin/config", "", ""},
		{"POST", "/levee/admin/reload", "", "Bearer wrong-token-wrong-token"},
		{"PUT", "/levee/admin/dry-run", `{"enabled":true}`, "Basic " + adminToken},
		{"POST", "/levee/admin/drill", `{"degrade_level":2,"shed_level":1,"duration":"1m"}`, "Bearer " + adminToken + "x"},
		{"DELETE", "/levee/admin/drill", "", "Bearer"},
		{"GET", "/levee/admin/nonexistent", "", ""},
	} {
		r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		w := httptest.NewRecorder()
		f.admin.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s %s with %q: status %d, want 401", tc.method, tc.path, tc.header, w.Code)
		}
		if got := w.Header().Get("WWW-Authenticate"); got != `Bearer realm="levee-admin"` {
			t.Errorf("%s %s: WWW-Authenticate %q", tc.method, tc.path, got)
		}
	}
	if c := f.rl.Current(); c.Signals.CPU.Target != 0.9 || c.Admit.DryRun || f.rl.State().Generation != 1 {
		t.Errorf("an unauthorized request changed the config: target %v dry-run %v generation %d", c.Signals.CPU.Target, c.Admit.DryRun, f.rl.State().Generation)
	}
	if _, _, ok := f.deg.Forced(time.Now()); ok || f.deg.Level() != 0 {
		t.Error("an unauthorized request forced a degradation level")
	}
	if _, _, ok := f.shed.ForcedShed(time.Now()); ok {
		t.Error("an unauthorized request forced a shed level")
	}
	if got := f.admin.Stats(); got.Unauthorized != 6 || got.Changes != 0 {
		t.Errorf("stats = %+v, want 6 unauthorized and no change", got)
	}
}

func TestAdminDisabledAndOpen(t *testing.T) {
	f := newAdminFixture(t, strings.Replace(adminFile, "enabled: true", "enabled: false", 1))
	if code, _ := f.do(t, "GET", "/levee/admin/config", adminToken, ""); code != http.StatusNotFound {
		t.Errorf("disabled endpoint: status %d, want 404", code)
	}
	// A Config built in code with the endpoint on and no credentials does
	// not validate; one with only client certificates refuses a request
	// without one.
	cfg := config.Default()
	cfg.Admin.Enabled = true
	if _, err := config.NewReloader(cfg, config.WithEnv(nil)); err == nil {
		t.Error("an admin endpoint without credentials validated")
	}
	cfg.Admin.ClientCert.Enabled = true
	rl, err := config.NewReloader(cfg, config.WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	NewAdmin(rl).ServeHTTP(w, httptest.NewRequest("GET", "/levee/admin/config", nil))
	if w.Code != http.StatusUnauthorized {
		t.Errorf("no token and no certificate: status %d, want 401", w.Code)
	}
}

func TestAdminClientCert(t *testing.T) {
	file := strings.Replace(adminFile, "  max_drill: 10m", "  max_drill: 10m\n  client_cert: {enabled: true, names: [ops.example, \"spiffe://example/ops\"]}", 1)
	f := newAdminFixture(t, file)
	for _, tc := range []struct {
		name string
		cert *x509.Certificate
		want int
	}{
		{"common name", &x509.Certificate{Subject: pkix.Name{CommonName: "ops.example"}}, http.StatusOK},
		{"DNS name", &x509.Certificate{DNSNames: []string{"x", "ops.example"}}, http.StatusOK},
		{"other name", &x509.Certificate{Subject: pkix.Name{CommonName: "intruder"}}, http.StatusUnauthorized},
		{"no certificate", nil, http.StatusUnauthorized},
	} {
		r := httptest.NewRequest("GET", "/levee/admin/config", nil)
		r.TLS = &tls.ConnectionState{}
		if tc.cert != nil {
			r.TLS.VerifiedChains = [][]*x509.Certificate{{tc.cert}}
		}
		w := httptest.NewRecorder()
		f.admin.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, w.Code, tc.want)
		}
	}
}

func TestAdminConfigAndReload(t *testing.T) {
	f := newAdminFixture(t, adminFile)
	code, doc := f.do(t, "GET", "/levee/admin/config", adminToken, "")
	if code != http.StatusOK || doc["generation"] != 1.0 || doc["source"] != f.path {
		t.Fatalf("GET /config: %d %v", code, doc)
	}
	cfg := doc["config"].(map[string]any)
	if tok := cfg["admin"].(map[string]any)["token"]; tok != config.Redacted {
		t.Errorf("token shown as %q, want redacted", tok)
	}
	if target := cfg["signals"].(map[string]any)["cpu"].(map[string]any)["target"]; target != 0.9 {
		t.Errorf("signals.cpu.target = %v", target)
	}

	// An invalid file: 422 naming line and field, the old config kept.
	bad := strings.Replace(adminFile, "target: 0.9", "target: 0.9\n    tagret: 0.8", 1)
	if err := os.WriteFile(f.path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	code, doc = f.do(t, "POST", "/levee/admin/reload", adminToken, "")
	if code != http.StatusUnprocessableEntity || doc["applied"] != false {
		t.Fatalf("POST /reload of an invalid file: %d %v", code, doc)
	}
	p := doc["errors"].([]any)[0].(map[string]any)
	if p["file"] != f.path || p["line"] != 11.0 || p["column"] != 5.0 || p["field"] != "signals.cpu.tagret" ||
		p["message"] != `unknown field "tagret" (did you mean "target"?)` {
		t.Errorf("problem = %v", p)
	}
	if f.rl.Current().Signals.CPU.Target != 0.9 {
		t.Error("the old config is not in force after a rejected reload")
	}

	// A valid one: 200 with the change.
	if err := os.WriteFile(f.path, []byte(strings.Replace(adminFile, "target: 0.9", "target: 0.8", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	code, doc = f.do(t, "POST", "/levee/admin/reload", adminToken, "")
	changes, _ := doc["changes"].([]any)
	if code != http.StatusOK || doc["applied"] != true || doc["generation"] != 2.0 || len(changes) != 1 {
		t.Fatalf("POST /reload: %d %v", code, doc)
	}
	if c := changes[0].(map[string]any); c["path"] != "signals.cpu.target" || c["old"] != "0.9" || c["new"] != "0.8" {
		t.Errorf("change = %v", c)
	}
	code, doc = f.do(t, "GET", "/levee/admin/config", adminToken, "")
	if lr := doc["last_reload"].(map[string]any); code != http.StatusOK || lr["ok"] != true || lr["reason"] != "admin" {
		t.Errorf("last_reload = %v", lr)
	}
	if code, _ := f.do(t, "GET", "/levee/admin/reload", adminToken, ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /reload: %d, want 405", code)
	}
}

func TestAdminDryRun(t *testing.T) {
	f := newAdminFixture(t, adminFile)
	code, doc := f.do(t, "PUT", "/levee/admin/dry-run", adminToken, `{"enabled": true}`)
	if code != http.StatusOK || doc["enabled"] != true || doc["override"] != true || !f.rl.Current().Admit.DryRun {
		t.Fatalf("PUT /dry-run: %d %v", code, doc)
	}
	if code, doc = f.do(t, "GET", "/levee/admin/dry-run", adminToken, ""); doc["enabled"] != true {
		t.Errorf("GET /dry-run: %d %v", code, doc)
	}
	for _, body := range []string{`{}`, `{"enabled": "yes"}`, `{"enabled": true, "x": 1}`, `not json`, `{"enabled": true} {}`} {
		if code, _ := f.do(t, "PUT", "/levee/admin/dry-run", adminToken, body); code != http.StatusBadRequest {
			t.Errorf("PUT /dry-run %s: %d, want 400", body, code)
		}
	}
	code, doc = f.do(t, "DELETE", "/levee/admin/dry-run", adminToken, "")
	if code != http.StatusOK || doc["enabled"] != false || doc["override"] != false || f.rl.Current().Admit.DryRun {
		t.Errorf("DELETE /dry-run: %d %v", code, doc)
	}
}

func TestAdminDrill(t *testing.T) {
	f := newAdminFixture(t, adminFile)
	for _, tc := range []struct {
		body string
		want int
	}{
		{`{"degrade_level": 2}`, http.StatusBadRequest},
		{`{"degrade_level": 2, "duration": "forever"}`, http.StatusBadRequest},
		{`{"degrade_level": 2, "duration": "500ms"}`, http.StatusBadRequest},
		{`{"degrade_level": 2, "duration": "11m"}`, http.StatusBadRequest},
		{`{"duration": "1m"}`, http.StatusBadRequest},
		{`{"degrade_level": 9, "duration": "1m"}`, http.StatusBadRequest},
		{`{"shed_level": 4.5, "duration": "1m"}`, http.StatusBadRequest},
		{`{"degrade_level": 1, "duration": "1m", "level": 2}`, http.StatusBadRequest},
	} {
		if code, doc := f.do(t, "POST", "/levee/admin/drill", adminToken, tc.body); code != tc.want {
			t.Errorf("POST /drill %s: %d %v, want %d", tc.body, code, doc, tc.want)
		}
	}
	if f.deg.Level() != 0 {
		t.Fatal("a refused drill forced a level")
	}
	code, doc := f.do(t, "POST", "/levee/admin/drill", adminToken, `{"degrade_level": 2, "shed_level": 1.5, "duration": "1m"}`)
	if code != http.StatusOK {
		t.Fatalf("POST /drill: %d %v", code, doc)
	}
	d, s := doc["degrade"].(map[string]any), doc["shed"].(map[string]any)
	if d["level"] != 2.0 || s["level"] != 1.5 || d["remaining_s"].(float64) < 59 || doc["degrade_max"] != 3.0 || doc["shed_supported"] != true {
		t.Errorf("drill state = %v", doc)
	}
	if f.deg.Level() != 2 {
		t.Errorf("degradation level = %d, want 2", f.deg.Level())
	}
	if code, doc = f.do(t, "DELETE", "/levee/admin/drill?part=shed", adminToken, ""); doc["shed"] != nil || doc["degrade"] == nil {
		t.Errorf("DELETE /drill?part=shed: %d %v", code, doc)
	}
	if code, doc = f.do(t, "DELETE", "/levee/admin/drill", adminToken, ""); doc["degrade"] != nil || f.deg.Level() != 0 {
		t.Errorf("DELETE /drill: %d %v, level %d", code, doc, f.deg.Level())
	}
	noShed := newAdminFixture(t, adminFile, WithAdminShed(nil))
	if code, _ := noShed.do(t, "POST", "/levee/admin/drill", adminToken, `{"shed_level": 1, "duration": "1m"}`); code != http.StatusNotImplemented {
		t.Errorf("shed drill without a ShedForcer: %d, want 501", code)
	}
}

// TestAdminDrillReachesHandlers forces a degradation level through the
// endpoint while a controller runs on virtual time: the next request's
// handler sees it (degrade.FromContext) at once, and the level ends within
// one control period of the drill's expiry.
func TestAdminDrillReachesHandlers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newAdminFixture(t, adminFile)
		ctl := admit.New(admit.WithDegrade(f.deg), admit.WithPeriod(admit.DefaultPeriod))
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go ctl.Run(ctx)
		var level degrade.Level
		h := NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			level = degrade.FromContext(r.Context())
		}), ctl)
		serve := func() degrade.Level {
			level = -1
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("request: status %d", w.Code)
			}
			return level
		}
		time.Sleep(time.Second)
		if got := serve(); got != 0 {
			t.Fatalf("level before the drill = %d", got)
		}
		if code, doc := f.do(t, "POST", "/levee/admin/drill", adminToken, `{"degrade_level": 2, "duration": "3s"}`); code != http.StatusOK {
			t.Fatalf("POST /drill: %d %v", code, doc)
		}
		start := time.Now()
		if got := serve(); got != 2 {
			t.Errorf("level right after the drill started = %d, want 2", got)
		}
		time.Sleep(3*time.Second - time.Millisecond)
		if got := serve(); got != 2 {
			t.Errorf("level 1 ms before the drill ends = %d, want 2", got)
		}
		time.Sleep(time.Millisecond + admit.DefaultPeriod)
		synctest.Wait()
		if got := serve(); got != 0 {
			t.Errorf("level one period after the drill ended (%v after it began) = %d, want 0", time.Since(start), got)
		}
		cancel()
	})
}
