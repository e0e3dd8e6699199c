package leveehttp

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/config"
)

// TestProtectDrillAndDryRun drives Protect's admission controller through
// its admin endpoint, as `levee load drill` and an operator do: a forced
// shed level sheds by criticality (lowest first) from the controller's
// next step, and ends when cleared; dry-run, switched on at run time,
// turns the same forced shedding into would-be rejections.
func TestProtectDrillAndDryRun(t *testing.T) {
	cfg := config.Default()
	cfg.Admin.Enabled = true
	cfg.Admin.Token = "0123456789abcdef-token"
	lo, err := config.ParseNetwork("127.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HTTP.TrustedNetworks = []config.Network{lo} // the criticality headers are honoured
	p, base := protectLoopback(t, context.Background(), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}),
		WithConfig(cfg, config.WithEnv(nil)))
	ctl := p.Controller()
	auth := []string{"Authorization", "Bearer " + cfg.Admin.Token}
	admin := func(method, path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, base+"/levee/admin"+path, strings.NewReader(body))
		req.Header.Set(auth[0], auth[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// waitFor polls the controller's snapshot (Run steps it every 50 ms).
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 10 s for %s", what)
			}
		}
	}
	served := func() (out [levee.NumCriticalities]int) {
		for _, c := range levee.Criticalities() {
			for range 20 {
				if code, _, _ := get(t, base+"/app", HeaderCriticality, c.String()); code == http.StatusOK {
					out[c.Rank()]++
				} else if code != http.StatusServiceUnavailable {
					t.Fatalf("%v: status %d, want 200 or 503", c, code)
				}
			}
		}
		return out
	}

	if code := admin("POST", "/drill", `{"shed_level": 2, "duration": "1m"}`); code != http.StatusOK {
		t.Fatalf("POST /drill shed_level 2: %d, want 200", code)
	}
	waitFor("the forced level", func() bool { return ctl.Snapshot().ForcedShed == 2 })
	if got, want := served(), [4]int{0, 0, 20, 20}; got != want {
		t.Errorf("forced level 2: served %v of 20 per rank, want %v", got, want)
	}

	if code := admin("PUT", "/dry-run", `{"enabled": true}`); code != http.StatusOK || !ctl.DryRun() {
		t.Fatalf("PUT /dry-run: %d, dry-run %v", code, ctl.DryRun())
	}
	before := ctl.Snapshot().WouldReject
	if got, want := served(), [4]int{20, 20, 20, 20}; got != want {
		t.Errorf("dry-run under forced level 2: served %v of 20 per rank, want %v", got, want)
	}
	after := ctl.Snapshot().WouldReject
	if n := after[levee.Sheddable][levee.Overloaded] - before[levee.Sheddable][levee.Overloaded]; n != 20 {
		t.Errorf("dry-run: %d SHEDDABLE would-be rejections, want 20", n)
	}
	if code := admin("DELETE", "/dry-run", ""); code != http.StatusOK || ctl.DryRun() {
		t.Fatalf("DELETE /dry-run: %d, dry-run %v", code, ctl.DryRun())
	}

	if code := admin("DELETE", "/drill", ""); code != http.StatusOK {
		t.Fatalf("DELETE /drill: %d", code)
	}
	waitFor("the end of the forced level", func() bool { return ctl.Snapshot().ForcedShed == 0 })
	if got, want := served(), [4]int{20, 20, 20, 20}; got != want {
		t.Errorf("after the drill: served %v of 20 per rank, want %v", got, want)
	}
}
