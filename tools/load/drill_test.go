package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/tools/report"
)

// drillService is a test service: an admin endpoint after the contract of
// leveehttp.Admin (GET, POST and DELETE …/levee/admin/drill with a bearer
// token), an application whose responses say the degradation level in
// force, and shedding by criticality at a forced shed level. It can rot
// in ways levee's own service cannot (levelService drills that one):
// broken names a degraded path that rots: "json" (level 2 loses its
// "degraded" field) or "order" (shedding starts with CRITICAL_PLUS).
type drillService struct {
	token  string
	broken string

	mu      sync.Mutex
	degrade int
	shed    float64
	until   time.Time
}

const testToken = "s3cret"

func (s *drillService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/levee/admin") {
		s.admin(w, r)
		return
	}
	s.mu.Lock()
	level, shed := s.degrade, s.shed
	if time.Now().After(s.until) {
		level, shed = 0, 0
	}
	s.mu.Unlock()
	cr, _ := levee.ParseCriticality(r.Header.Get("Levee-Criticality"))
	rank := float64(cr.Rank())
	if s.broken == "order" {
		rank = 3 - rank
	}
	if rank+1 <= shed {
		w.Header().Set("Levee-Reject", "overloaded")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	doc := map[string]any{"degraded": level > 0, "items": []int{1, 2, 3}}
	if level >= 2 {
		delete(doc, "items") // the expensive part is left out
		if s.broken == "json" {
			delete(doc, "degraded")
		}
	}
	if level > 0 {
		w.Header().Set("X-Degraded", fmt.Sprint(level))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(doc)
}

func (s *drillService) admin(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]string{"error": "unauthorized"})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		var body struct {
			DegradeLevel *int     `json:"degrade_level"`
			ShedLevel    *float64 `json:"shed_level"`
			Duration     string   `json:"duration"`
		}
		d, err := time.ParseDuration(func() string { _ = json.NewDecoder(r.Body).Decode(&body); return body.Duration }())
		if err != nil || d < time.Second {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"error": "duration is mandatory"})
			return
		}
		s.until = time.Now().Add(d)
		if body.DegradeLevel != nil {
			s.degrade = *body.DegradeLevel
		}
		if body.ShedLevel != nil {
			s.shed = *body.ShedLevel
		}
	case http.MethodDelete:
		s.degrade, s.shed = 0, 0
	}
	st := DrillState{DegradeMax: 2, ShedSupported: true}
	if s.degrade > 0 {
		st.Degrade = &ForcedLevel{Level: float64(s.degrade), RemainingS: time.Until(s.until).Seconds()}
	}
	if s.shed > 0 {
		st.Shed = &ForcedLevel{Level: s.shed, RemainingS: time.Until(s.until).Seconds()}
	}
	json.NewEncoder(w).Encode(st)
}

var drillChecks = []string{
	"*: status=200",
	">=1: header:X-Degraded",
	"0: !header:X-Degraded",
	"0: json:degraded=false",
	">=1: json:degraded=true",
	"2: !json:items",
	"<=1: json:items[2]=3",
}

func runDrill(t *testing.T, s *drillService, token string, overload float64) (*DrillReport, error) {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	var checks []Check
	for _, c := range drillChecks {
		ck, err := ParseCheck(c)
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, ck)
	}
	return Drill(context.Background(), DrillConfig{
		Target:      HTTP{URL: srv.URL + "/app"},
		Admin:       &Admin{URL: srv.URL + "/levee/admin", Token: token},
		Checks:      checks,
		Rate:        200, // 15 requests a criticality a probe: enough to show an inversion (orderSlack)
		Hold:        300 * time.Millisecond,
		OverloadRPS: overload,
	})
}

func TestDrillPasses(t *testing.T) {
	s := &drillService{token: testToken}
	rep, err := runDrill(t, s, testToken, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Drill
	if !d.Passed || len(d.Failures) != 0 {
		t.Fatalf("drill failed on a service whose degraded paths work: %v", d.Failures)
	}
	var names []string
	for _, l := range d.Levels {
		names = append(names, l.Name)
		if l.Responses < 10 || !l.Passed {
			t.Errorf("%s: %d responses, passed %v", l.Name, l.Responses, l.Passed)
		}
	}
	if got, want := strings.Join(names, ", "), "level 0, level 1, level 2, shed 1, shed 2, shed 3"; got != want {
		t.Errorf("levels %s, want %s", got, want)
	}
	if lv := d.Levels[2]; len(lv.Checks) != 4 || !lv.Forced {
		t.Errorf("level 2: %d checks (want 4: status, header, degraded, no items), forced %v", len(lv.Checks), lv.Forced)
	}
	if sh := d.Levels[4].Shedding; sh == nil || !sh.OrderHeld || sh.Rejected[0].Name != "SHEDDABLE" || sh.Rejected[1].Share != 1 || sh.Rejected[2].Share != 0 {
		t.Errorf("shed 2: %+v, want SHEDDABLE and SHEDDABLE_PLUS shed, the rest served", sh)
	}
	if s.degrade != 0 || s.shed != 0 {
		t.Errorf("the drill left levels in force: degrade %d, shed %v", s.degrade, s.shed)
	}
	if len(rep.Runs) != 6 || rep.Tool != "load drill" {
		t.Errorf("report: tool %q, %d runs", rep.Tool, len(rep.Runs))
	}
}

func TestDrillFailsOnARottenPath(t *testing.T) {
	rep, err := runDrill(t, &drillService{token: testToken, broken: "json"}, testToken, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := rep.Drill
	if d.Passed || len(d.Failures) != 1 {
		t.Fatalf("passed %v, failures %v; want one failure", d.Passed, d.Failures)
	}
	want := `level 2: check ">=1: json:degraded=true" failed on`
	if !strings.HasPrefix(d.Failures[0], want) || !strings.Contains(d.Failures[0], "field degraded absent") {
		t.Errorf("failure %q, want it to start with %q and say why", d.Failures[0], want)
	}
}

func TestDrillFailsOnShedOrder(t *testing.T) {
	rep, err := runDrill(t, &drillService{token: testToken, broken: "order"}, testToken, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Join(rep.Drill.Failures, "\n")
	if rep.Drill.Passed || !strings.Contains(f, "shed 1: shedding out of order: CRITICAL_PLUS rejected 100%, more than CRITICAL (0%)") {
		t.Errorf("failures:\n%s\nwant shedding out of order at shed 1", f)
	}
	if !strings.Contains(f, "shed 1: at shed level 1, SHEDDABLE rejected only 0% (want ≥ 90%)") {
		t.Errorf("failures:\n%s\nwant SHEDDABLE not shed at shed level 1", f)
	}
}

func TestDrillBadToken(t *testing.T) {
	_, err := runDrill(t, &drillService{token: testToken}, "wrong", 0)
	var ae *AdminError
	if !errors.As(err, &ae) || ae.Status != http.StatusUnauthorized || !strings.Contains(err.Error(), "the token is wrong or missing") {
		t.Errorf("err = %v, want a 401 AdminError", err)
	}
}

func TestDrillLevelBeyondTheService(t *testing.T) {
	srv := httptest.NewServer(&drillService{token: testToken})
	defer srv.Close()
	_, err := Drill(context.Background(), DrillConfig{Target: HTTP{URL: srv.URL}, Admin: &Admin{URL: srv.URL + "/levee/admin", Token: testToken}, Levels: []int{3}})
	if err == nil || !strings.Contains(err.Error(), "level 3 cannot be forced") {
		t.Errorf("err = %v", err)
	}
}

func TestParseCheck(t *testing.T) {
	bad := []string{"status=200", "x: status=200", "1-: status=200", "3-1: status=200", "1: status=abc", "1: status=600", "1: !status=200",
		"1: header:", "1: !header:A=b", "1: json:", "1: json:a[x]", "1: json:a[1", "1: !json:a=1", "1: body=x", ">=: status=200"}
	for _, s := range bad {
		if _, err := ParseCheck(s); err == nil {
			t.Errorf("ParseCheck(%q): err = nil", s)
		}
	}
	tests := []struct {
		check  string
		levels []int // applies at
		not    []int
	}{
		{"*: status=200", []int{0, 1, 5}, nil},
		{"2: status=2xx", []int{2}, []int{1, 3}},
		{"1-3: header:X", []int{1, 3}, []int{0, 4}},
		{">=2: json:a", []int{2, 9}, []int{1}},
		{"<=1: json:a", []int{0, 1}, []int{2}},
	}
	for _, tt := range tests {
		c, err := ParseCheck(tt.check)
		if err != nil {
			t.Fatalf("ParseCheck(%q): %v", tt.check, err)
		}
		for _, l := range tt.levels {
			if !c.Applies(l) {
				t.Errorf("%q does not apply at level %d", tt.check, l)
			}
		}
		for _, l := range tt.not {
			if c.Applies(l) {
				t.Errorf("%q applies at level %d", tt.check, l)
			}
		}
	}
}

func TestCheckEval(t *testing.T) {
	body := []byte(`{"degraded": true, "level": 2, "data": {"items": [{"id": "a"}, {"id": 7.0}]}, "note": "x"}`)
	hdr := http.Header{"X-Degraded": {"2"}}
	tests := []struct {
		check  string
		status int
		want   string // "" passes
	}{
		{"*: status=200", 200, ""},
		{"*: status=2xx", 204, ""},
		{"*: status=200", 503, "status 503"},
		{"*: header:X-Degraded", 200, ""},
		{"*: header:x-degraded=2", 200, ""},
		{"*: header:X-Degraded=1", 200, `header X-Degraded is "2"`},
		{"*: header:X-Other", 200, "header X-Other absent"},
		{"*: !header:X-Degraded", 200, `header X-Degraded present ("2")`},
		{"*: json:degraded=true", 200, ""},
		{"*: json:$.level=2", 200, ""},
		{"*: json:.data.items[1].id=7", 200, ""},
		{"*: json:data.items[0].id=a", 200, ""},
		{`*: json:data.items[0].id="a"`, 200, ""},
		{"*: json:note=y", 200, `field note is "x"`},
		{"*: json:data.items[5]", 200, "field data.items[5] absent"},
		{"*: !json:data", 200, `field data present ({"items":[{"id":"a"},{"id":7.0}]})`},
		{"*: !json:missing", 200, ""},
		{"*: json:degraded=false", 200, "field degraded is true"},
	}
	for _, tt := range tests {
		c, err := ParseCheck(tt.check)
		if err != nil {
			t.Fatalf("ParseCheck(%q): %v", tt.check, err)
		}
		if got := c.Eval(tt.status, hdr, body); got != tt.want {
			t.Errorf("%q on status %d: %q, want %q", tt.check, tt.status, got, tt.want)
		}
	}
	c, _ := ParseCheck("*: json:a")
	if got := c.Eval(200, nil, []byte("<html>")); got != "body is not JSON" {
		t.Errorf("non-JSON body: %q", got)
	}
}

// levelService is a levee service as a user builds one: levee's handler
// with an admission controller and a degradation controller, and the
// admin endpoint (leveehttp.NewAdmin) outside admission control, able to
// force degradation and shed levels. Its handler degrades by the level in
// its context; rotten leaves the "degraded" field out from level 2 on.
// Its callers are trusted, so that CRITICAL_PLUS stays what they say.
func levelService(t *testing.T, rotten bool) *httptest.Server {
	t.Helper()
	cfg := config.Default()
	cfg.Admin.Enabled = true
	cfg.Admin.Token = testToken + "-long-enough"
	rl, err := config.NewReloader(cfg, config.WithEnv(nil), config.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	deg := degrade.New()
	ctl := admit.New(admit.WithDegrade(deg))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go ctl.Run(ctx)
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := degrade.FromContext(r.Context())
		doc := map[string]any{"degraded": l > 0}
		if rotten && l >= 2 {
			doc = map[string]any{}
		}
		if l > 0 {
			w.Header().Set("X-Degraded", strconv.Itoa(int(l)))
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(doc)
	})
	admin := leveehttp.NewAdmin(rl, leveehttp.WithAdminDegrade(deg), leveehttp.WithAdminShed(ctl), leveehttp.WithAdminLogger(slog.New(slog.DiscardHandler)))
	mux := http.NewServeMux()
	mux.Handle(admin.Prefix()+"/", admin)
	mux.Handle("/", leveehttp.NewHandler(app, ctl, leveehttp.WithTrust(func(*http.Request) bool { return true })))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// The drill against levee's own admin endpoint: every degradation level
// of the service is forced, reaches the handler, and the checks pass;
// every shed level 1, 2, 3 is forced and sheds in order (SHEDDABLE first,
// CRITICAL_PLUS never); with a rotten path the drill fails naming its
// level and check.
func TestDrillLeveeService(t *testing.T) {
	for _, rotten := range []bool{false, true} {
		srv := levelService(t, rotten)
		var checks []Check
		for _, s := range []string{"*: status=200", ">=1: header:X-Degraded", "0: !header:X-Degraded", ">=1: json:degraded=true", "0: json:degraded=false"} {
			c, err := ParseCheck(s)
			if err != nil {
				t.Fatal(err)
			}
			checks = append(checks, c)
		}
		admin := &Admin{URL: srv.URL + "/levee/admin", Token: testToken + "-long-enough"}
		rep, err := Drill(context.Background(), DrillConfig{Target: HTTP{URL: srv.URL + "/app"}, Admin: admin, Checks: checks, Rate: 50, Hold: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		d := rep.Drill
		if len(d.Levels) < 3 {
			t.Fatalf("rotten %v: %d levels, want the service's 0 … max (at least 0, 1, 2)", rotten, len(d.Levels))
		}
		for _, l := range d.Levels {
			if l.Level > 0 && !l.Forced {
				t.Errorf("rotten %v: %s not confirmed by the endpoint", rotten, l.Name)
			}
		}
		if !rotten && (!d.Passed || len(d.Failures) > 0) {
			t.Errorf("working service: failures %v", d.Failures)
		}
		if rotten && (d.Passed || len(d.Failures) == 0 || !strings.HasPrefix(d.Failures[0], `level 2: check ">=1: json:degraded=true" failed on`)) {
			t.Errorf("rotten service: passed %v, failures %v; want level 2's check named", d.Passed, d.Failures)
		}
		var shed []string
		for _, l := range d.Levels {
			if l.Shedding == nil {
				continue
			}
			shed = append(shed, l.Name)
			sh := l.Shedding
			if !l.Forced || !sh.OrderHeld || len(sh.Rejected) != 4 {
				t.Errorf("rotten %v: %s: forced %v, %+v", rotten, l.Name, l.Forced, sh)
				continue
			}
			// Shed level L sheds the L lowest criticalities, all of them.
			for r, c := range sh.Rejected {
				want := 0.0
				if float64(r) < sh.ForcedLevel {
					want = 1
				}
				if c.Share != want {
					t.Errorf("rotten %v: %s: %s rejected %.2f, want %.0f", rotten, l.Name, c.Name, c.Share, want)
				}
			}
		}
		if got := strings.Join(shed, ", "); got != "shed 1, shed 2, shed 3" {
			t.Errorf("rotten %v: shed levels drilled: %q, want shed 1, shed 2, shed 3", rotten, got)
		}
		if st, err := admin.State(context.Background()); err != nil || st.Degrade != nil || st.Shed != nil {
			t.Errorf("after the drill: %+v, %v; want nothing forced", st, err)
		}
	}
}

// TestSheddingOrderNoise: the order check allows for chance in proportion
// to the sample: two classes a server treats as one (55 % against 49 %
// rejected of about 1,600 requests each, as an untrusted caller's
// CRITICAL_PLUS capped to CRITICAL read once on loopback) keep the order;
// a real inversion breaks it however large the sample, and no handful of
// requests shows one.
func TestSheddingOrderNoise(t *testing.T) {
	run := func(rps float64, rejected ...float64) report.Run {
		names := []string{"SHEDDABLE", "SHEDDABLE_PLUS", "CRITICAL", "CRITICAL_PLUS"}
		ph := report.Phase{Name: "overload", StartS: 0, EndS: 4}
		for i, r := range rejected {
			ph.ByCriticality = append(ph.ByCriticality, report.Class{Name: names[i], Rates: report.Rates{OfferedRPS: rps, RejectedRPS: r * rps}})
		}
		return report.Run{Phases: []report.Phase{ph}}
	}
	tests := []struct {
		name string
		run  report.Run
		held bool
	}{
		{"two equal classes, chance apart", run(400, 1, 0.9, 0.49, 0.55), true},
		{"in order", run(400, 1, 0.8, 0.3, 0.1), true},
		{"inverted", run(400, 1, 0.8, 0.2, 0.6), false},
		{"inverted by 6 points in 40,000 requests each", run(10000, 1, 0.8, 0.49, 0.55), false},
		{"a handful of requests", run(2, 1, 0.5, 0.5, 1), true},
	}
	for _, tt := range tests {
		sh := shedding(tt.run, 0)
		if sh.OrderHeld != tt.held {
			t.Errorf("%s: order held %v (%v); want %v", tt.name, sh.OrderHeld, sh.Problems, tt.held)
		}
	}
	if s := orderSlack(0.5, 1600, 0.5, 1600); s < 0.07 || s > 0.071 {
		t.Errorf("slack for two halves of 1,600: %.4f; want 4 standard errors, 0.0707", s)
	}
	if s := orderSlack(0, 1e6, 0, 1e6); s != orderSlackMin {
		t.Errorf("slack for two large samples: %.4f; want the minimum %v", s, orderSlackMin)
	}
}
