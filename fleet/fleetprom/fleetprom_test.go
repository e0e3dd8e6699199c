package fleetprom

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-dev/levee/fleet"
)

func TestCollectorBoundsTenants(t *testing.T) {
	snap := fleet.Snapshot{StoreOK: false, Fallback: true, StoreErrors: 3, LiveInstances: 3}
	snap.Tenants = append(snap.Tenants, fleet.TenantSnapshot{Default: true, QuotaCores: 1, State: fleet.Local, FleetUsageCores: 0.5})
	for i := range 100 {
		snap.Tenants = append(snap.Tenants, fleet.TenantSnapshot{
			Name: "t" + string(rune('A'+i%26)) + string(rune('a'+i/26)), QuotaCores: 1, State: fleet.Leased,
			FleetUsageCores: float64(i) / 100, Rejected: 1,
		})
	}
	c := newCollector(func() fleet.Snapshot { return snap }, 5)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if n := testutil.CollectAndCount(c, "levee_fleet_tenant_usage_cores"); n != 5 {
		t.Errorf("%d tenant usage series, want the top 5", n)
	}
	want := `
# HELP levee_fleet_fallback 1 while the leases have expired for want of the store and every tenant is held to its local share (quota ÷ live instances).
# TYPE levee_fleet_fallback gauge
levee_fleet_fallback 1
# HELP levee_fleet_store_up 1 if the last exchange with the store succeeded, else 0.
# TYPE levee_fleet_store_up gauge
levee_fleet_store_up 0
# HELP levee_fleet_tenants Tenants (and the default pool) by where their rate on this instance comes from.
# TYPE levee_fleet_tenants gauge
levee_fleet_tenants{lease="leased"} 100
levee_fleet_tenants{lease="local"} 1
levee_fleet_tenants{lease="unlimited"} 0
# HELP levee_fleet_rejected_total Requests the fleet quota rejected, all tenants.
# TYPE levee_fleet_rejected_total counter
levee_fleet_rejected_total 100
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "levee_fleet_fallback", "levee_fleet_store_up", "levee_fleet_tenants", "levee_fleet_rejected_total"); err != nil {
		t.Error(err)
	}
	top := TopK(snap.Tenants, 3)
	if top[0].FleetUsageCores != 0.99 || top[2].FleetUsageCores != 0.97 {
		t.Errorf("top 3 by fleet usage: %v, %v, %v; want 0.99, 0.98, 0.97", top[0].FleetUsageCores, top[1].FleetUsageCores, top[2].FleetUsageCores)
	}
}
