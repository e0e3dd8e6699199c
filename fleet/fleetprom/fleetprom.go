// Package fleetprom exports a fleet.Limiter's state as Prometheus metrics:
// the store's health, the fallback to local shares, the lease states, the
// metered CPU, and usage, demand, lease and quota for the top-K tenants
// only, so that the number of series stays bounded whatever the number
// of tenants.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), fleetprom is an adapter in the fleet
// module (github.com/levee-dev/levee/fleet): it imports fleet and
// github.com/prometheus/client_golang only, beside leveeprom's collectors on
// the same registry, and no package of levee imports it.
package fleetprom

import (
	"cmp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/fleet"
)

// DefaultTopK is the number of tenants given series of their own.
const DefaultTopK = 20

// DefaultPoolLabel is the tenant label of the default pool.
const DefaultPoolLabel = "(default)"

// Collector is a prometheus.Collector of one Limiter. Register it on your
// own Registerer. Each scrape takes one Snapshot.
type Collector struct {
	snap func() fleet.Snapshot
	topK int

	storeUp, fallback, storeErrors, exchange, live, ratio, cpu *prometheus.Desc
	tenants, admitted, rejected                                *prometheus.Desc
	quota, lease, usage, fleetUsage, demand, rejectedRate      *prometheus.Desc
}

// New returns a Collector of l exporting topK tenants (≤ 0:
// DefaultTopK), ranked by the fleet's usage as last reported by the store,
// then by this instance's usage, then by name; the default pool counts as a
// tenant named DefaultPoolLabel.
func New(l *fleet.Limiter, topK int) *Collector {
	return newCollector(l.Snapshot, topK)
}

func newCollector(snap func() fleet.Snapshot, topK int) *Collector {
	if topK <= 0 {
		topK = DefaultTopK
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("levee_fleet_"+name, help, labels, nil)
	}
	return &Collector{
		snap: snap, topK: topK,
		storeUp:      d("store_up", "1 if the last exchange with the store succeeded, else 0."),
		fallback:     d("fallback", "1 while the leases have expired for want of the store and every tenant is held to its local share (quota ÷ live instances)."),
		storeErrors:  d("store_errors_total", "Exchanges with the store that failed."),
		exchange:     d("exchange_seconds", "Duration of the last exchange with the store."),
		live:         d("live_instances", "Instances the store last counted as live."),
		ratio:        d("cost_per_wall_second", "CPU core-seconds per second of handler wall time in the last period: the meter's division of the process's CPU."),
		cpu:          d("metered_cpu_seconds_total", "CPU core-seconds metered and charged to tenants."),
		tenants:      d("tenants", "Tenants (and the default pool) by where their rate on this instance comes from.", "lease"),
		admitted:     d("admitted_total", "Requests the fleet quota admitted, all tenants."),
		rejected:     d("rejected_total", "Requests the fleet quota rejected, all tenants."),
		quota:        d("tenant_quota_cores", "Fleet quota of a top-K tenant, in cores.", "tenant"),
		lease:        d("tenant_lease_cores", "Rate this instance enforces for a top-K tenant, in cores.", "tenant"),
		usage:        d("tenant_usage_cores", "CPU a top-K tenant used on this instance in the last period, in cores.", "tenant"),
		fleetUsage:   d("tenant_fleet_usage_cores", "CPU a top-K tenant used across the fleet, as the store last reported it, in cores.", "tenant"),
		demand:       d("tenant_demand_cores", "Smoothed demand of a top-K tenant on this instance (usage plus the estimated cost of its rejected requests), in cores.", "tenant"),
		rejectedRate: d("tenant_rejected_per_second", "Requests of a top-K tenant the fleet quota rejected per second on this instance, last period.", "tenant"),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.storeUp, c.fallback, c.storeErrors, c.exchange, c.live, c.ratio, c.cpu,
		c.tenants, c.admitted, c.rejected, c.quota, c.lease, c.usage, c.fleetUsage, c.demand, c.rejectedRate} {
		ch <- d
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ctr := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	g(c.storeUp, b2f(s.StoreOK))
	g(c.fallback, b2f(s.Fallback))
	ctr(c.storeErrors, float64(s.StoreErrors))
	g(c.exchange, s.ExchangeSeconds)
	g(c.live, float64(s.LiveInstances))
	g(c.ratio, s.CostPerWallSecond)
	ctr(c.cpu, s.CPUSeconds)
	var states [3]float64
	var adm, rej uint64
	for _, t := range s.Tenants {
		if int(t.State) < len(states) {
			states[t.State]++
		}
		adm += t.Admitted
		rej += t.Rejected
	}
	for st, n := range states {
		g(c.tenants, n, fleet.LeaseState(st).String())
	}
	ctr(c.admitted, float64(adm))
	ctr(c.rejected, float64(rej))
	for _, t := range TopK(s.Tenants, c.topK) {
		name := t.Name
		if t.Default {
			name = DefaultPoolLabel
		}
		g(c.quota, t.QuotaCores, name)
		g(c.lease, t.LeaseCores, name)
		g(c.usage, t.UsageCores, name)
		g(c.fleetUsage, t.FleetUsageCores, name)
		g(c.demand, t.DemandCores, name)
		g(c.rejectedRate, t.RejectedRPS, name)
	}
}

// TopK returns the k tenants of ts that use the most: by fleet usage,
// then usage on this instance, then name. ts is not modified.
func TopK(ts []fleet.TenantSnapshot, k int) []fleet.TenantSnapshot {
	out := slices.Clone(ts)
	slices.SortFunc(out, func(a, b fleet.TenantSnapshot) int {
		if c := cmp.Compare(b.FleetUsageCores, a.FleetUsageCores); c != 0 {
			return c
		}
		if c := cmp.Compare(b.UsageCores, a.UsageCores); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out[:min(k, len(out))]
}
