package backend

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

func newLevee(t *testing.T, o LeveeOptions) *Server {
	t.Helper()
	srv, err := New(Options{Protection: Levee, Work: Work{Iterations: 10}, Start: time.Now(), Horizon: time.Minute, Levee: o})
	if err != nil {
		t.Fatalf("New(%+v) err = %v, want nil", o, err)
	}
	return srv
}

func serve(srv *Server, remote, path string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.RemoteAddr = remote
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, r)
	return rec
}

// TestLeveeTrust checks that callers from a trusted network get their
// Levee-Criticality honoured in full and the others are capped at
// CRITICAL.
func TestLeveeTrust(t *testing.T) {
	srv := newLevee(t, LeveeOptions{Trust: []string{"127.0.0.0/8", "::1/128"}})
	plus := map[string]string{"Levee-Criticality": "CRITICAL_PLUS"}
	for _, remote := range []string{"127.0.0.1:1000", "127.9.8.7:1000", "[::1]:1000", "10.0.0.1:1000", "[2001:db8::1]:1000", "garbage"} {
		if rec := serve(srv, remote, "/work", plus); rec.Code != http.StatusOK {
			t.Fatalf("%s: status %d, want 200", remote, rec.Code)
		}
	}
	snap := srv.ctrl.Snapshot()
	if got := snap.Admitted[levee.CriticalPlus]; got != 3 {
		t.Errorf("admitted CRITICAL_PLUS = %d, want 3 (the trusted callers)", got)
	}
	if got := snap.Admitted[levee.Critical]; got != 3 {
		t.Errorf("admitted CRITICAL = %d, want 3 (the untrusted callers, capped)", got)
	}
	if by := srv.Report().AdmittedBy; by["CRITICAL_PLUS"] != 3 || by["CRITICAL"] != 3 || len(by) != 2 {
		t.Errorf("Report().AdmittedBy = %v, want CRITICAL_PLUS 3, CRITICAL 3", by)
	}
	if _, err := New(Options{Protection: Levee, Levee: LeveeOptions{Trust: []string{"127.0.0.0/33"}}}); err == nil || !strings.Contains(err.Error(), "127.0.0.0/33") {
		t.Errorf("New with a malformed network: err = %v, want one naming it", err)
	}
}

// TestLeveeStatus checks the status page outside admission and the
// counters, and the goroutines signal in its JSON.
func TestLeveeStatus(t *testing.T) {
	srv := newLevee(t, LeveeOptions{Status: true, GoroutineCeiling: 1 << 20})
	rec := serve(srv, "127.0.0.1:1", StatusPath+"?format=json&history=0", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("status page: %d, want 200", rec.Code)
	}
	var doc struct {
		Current *struct{} `json:"current"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || doc.Current == nil {
		t.Fatalf("status JSON %s: %v, want a current sample", rec.Body.Bytes(), err)
	}
	srv.ctrl.Step(time.Now())
	found := false
	for _, s := range srv.ctrl.Snapshot().Signals {
		found = found || s.Name == "goroutines"
	}
	if !found {
		t.Errorf("controller signals %+v: no goroutines signal", srv.ctrl.Snapshot().Signals)
	}
	var answers int64
	for _, n := range srv.Report().Series.OK {
		answers += n
	}
	if answers != 0 {
		t.Errorf("the status request was counted as %d answers of the service, want 0", answers)
	}
	if rec := serve(srv, "127.0.0.1:1", "/work", nil); rec.Code != http.StatusOK {
		t.Errorf("work behind the status mux: %d, want 200", rec.Code)
	}
}

// TestLeveeForceOverload checks that a forced overload makes the
// controller shed nearly everything once it has stepped.
func TestLeveeForceOverload(t *testing.T) {
	srv := newLevee(t, LeveeOptions{ForceOverload: true})
	now := time.Now()
	for i := range 40 {
		for range 20 {
			serve(srv, "127.0.0.1:1", "/work", nil)
		}
		srv.ctrl.Step(now.Add(time.Duration(i+1) * 50 * time.Millisecond))
	}
	rejected := 0
	for range 200 {
		if rec := serve(srv, "127.0.0.1:1", "/work", nil); rec.Code == http.StatusServiceUnavailable {
			rejected++
		}
	}
	if rejected < 150 {
		t.Errorf("rejected %d of 200 under a forced overload, want ≥ 150", rejected)
	}
}

// TestErrorLog checks that panics are counted and copied whatever the
// noise, and other messages counted by kind with a few copies each.
func TestErrorLog(t *testing.T) {
	var out bytes.Buffer
	l := NewErrorLog(&out)
	lg := l.Logger()
	for range 50 {
		lg.Printf("http: superfluous response.WriteHeader call from x")
	}
	lg.Printf("http: panic serving 127.0.0.1:5: boom\ngoroutine 7 [running]:\n...")
	for i := range 200 {
		lg.Printf("kind%d a b c", i)
	}
	if got := l.Panics(); got != 1 {
		t.Errorf("Panics() = %d, want 1", got)
	}
	k := l.Kinds()
	if k["http: superfluous response.WriteHeader"] != 50 || k["http: panic serving"] != 1 {
		t.Errorf("Kinds() = %v, want 50 superfluous, 1 panic", k)
	}
	if len(k) > maxKinds+1 || k["other"] == 0 {
		t.Errorf("Kinds() has %d kinds (other %d), want at most %d and the rest in other", len(k), k["other"], maxKinds+1)
	}
	s := out.String()
	if !strings.Contains(s, "panic serving 127.0.0.1:5: boom\ngoroutine 7") {
		t.Errorf("the panic and its stack were not copied: %q", s)
	}
	if n := strings.Count(s, "superfluous"); n != copiesPerKind {
		t.Errorf("copied %d superfluous messages, want %d", n, copiesPerKind)
	}
	if n := strings.Count(s, "\n"); n > maxCopied+2 {
		t.Errorf("copied %d lines, want at most about %d", n, maxCopied)
	}
}
