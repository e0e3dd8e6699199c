package leveeprom_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	leveeconfig "github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/leveeprom"
)

func TestConfigCollector(t *testing.T) {
	base := leveeconfig.Default()
	base.Admin.Enabled = true
	base.Admin.Token = "0123456789abcdef0123"
	rl, err := leveeconfig.NewReloader(base, leveeconfig.WithEnv(nil), leveeconfig.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	admin := leveehttp.NewAdmin(rl, leveehttp.WithAdminLogger(slog.New(slog.DiscardHandler)))
	rl.SetOverride("admit.dry_run", "true")                                                                  // applied, 1 change
	rl.SetOverride("admit.dry_run", "maybe")                                                                 // rejected
	rl.SetOverride("signals.cpu.target", "0.95")                                                             // unchanged (the default)
	admin.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/levee/admin/config", nil)) // 401

	c := leveeprom.NewConfigCollector(rl, admin)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := `
# HELP levee_admin_unauthorized_total Admin endpoint requests refused with 401.
# TYPE levee_admin_unauthorized_total counter
levee_admin_unauthorized_total 1
# HELP levee_config_changes_total Configuration fields changed by applied reloads.
# TYPE levee_config_changes_total counter
levee_config_changes_total 1
# HELP levee_config_generation Generation of the configuration in force (1 at start, +1 per applied change).
# TYPE levee_config_generation gauge
levee_config_generation 2
# HELP levee_config_last_reload_success 1 if the last reload was applied or found nothing to change, 0 if it was rejected.
# TYPE levee_config_last_reload_success gauge
levee_config_last_reload_success 1
# HELP levee_config_overrides Runtime overrides in force (set through the admin endpoint).
# TYPE levee_config_overrides gauge
levee_config_overrides 2
# HELP levee_config_reloads_total Configuration reloads by result: applied (a change put in force), rejected (the configuration in force kept), unchanged.
# TYPE levee_config_reloads_total counter
levee_config_reloads_total{result="applied"} 1
levee_config_reloads_total{result="rejected"} 1
levee_config_reloads_total{result="unchanged"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"levee_admin_unauthorized_total", "levee_config_changes_total", "levee_config_generation",
		"levee_config_last_reload_success", "levee_config_overrides", "levee_config_reloads_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(c, "levee_config_applied_timestamp_seconds"); n != 1 {
		t.Errorf("levee_config_applied_timestamp_seconds: %d samples, want 1", n)
	}
}
