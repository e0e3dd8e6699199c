package leveehttp

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// TestStatusDryRun checks that the status page shows what a controller in
// dry-run would reject beside what it rejects: counts and rates per
// criticality, by reason, and the badge.
func TestStatusDryRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &statusScript{}
		src.set(func(s *admit.Snapshot) { s.DryRun = true })
		st := newStatus(src.get, nil)
		defer st.Stop()
		for range 3 {
			src.set(func(s *admit.Snapshot) {
				s.Admitted[levee.Sheddable] += 30
				s.WouldReject[levee.Sheddable][levee.Overloaded] += 20
				s.WouldReject[levee.Critical][levee.Quota] += 5
				s.WouldShedRPS = 20
			})
			time.Sleep(time.Second)
			synctest.Wait()
		}
		rec := httptest.NewRecorder()
		st.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status?format=json&history=0", nil))
		var doc struct {
			Current struct {
				DryRun        bool    `json:"dry_run"`
				WouldShedRPS  float64 `json:"would_shed_rps"`
				Criticalities []struct {
					Name           string  `json:"name"`
					Rejected       uint64  `json:"rejected"`
					WouldReject    uint64  `json:"would_reject"`
					WouldRejectRPS float64 `json:"would_reject_rps"`
				} `json:"criticalities"`
				WouldReject map[string]map[string]uint64 `json:"would_reject_by_reason"`
			} `json:"current"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
			t.Fatal(err)
		}
		cur := doc.Current
		if !cur.DryRun || cur.WouldShedRPS != 20 {
			t.Errorf("dry_run %v, would_shed_rps %v; want true and 20", cur.DryRun, cur.WouldShedRPS)
		}
		got := map[string][3]float64{}
		for _, c := range cur.Criticalities {
			got[c.Name] = [3]float64{float64(c.Rejected), float64(c.WouldReject), c.WouldRejectRPS}
		}
		for name, want := range map[string][3]float64{
			"SHEDDABLE":     {0, 60, 20},
			"CRITICAL":      {0, 15, 5},
			"CRITICAL_PLUS": {0, 0, 0},
		} {
			if got[name] != want {
				t.Errorf("%s: rejected, would reject, would reject/s = %v, want %v", name, got[name], want)
			}
		}
		if got := cur.WouldReject["SHEDDABLE"]["overloaded"]; got != 60 {
			t.Errorf("would_reject_by_reason SHEDDABLE overloaded = %d, want 60", got)
		}
		page := httptest.NewRecorder()
		st.ServeHTTP(page, httptest.NewRequest(http.MethodGet, "/status", nil))
		for _, want := range []string{"would reject", "DRY RUN", "would_reject_rps"} {
			if !strings.Contains(page.Body.String(), want) {
				t.Errorf("the page does not contain %q", want)
			}
		}
	})
}
