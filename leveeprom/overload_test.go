package leveeprom

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/overload"
)

func TestOverloadCollector(t *testing.T) {
	m := overload.New(overload.WithResources(overload.Resource{
		Name: "memory", Unit: "bytes", Enter: [3]float64{0.8, 0.9, 0.95},
		Read: func() overload.Reading { return overload.Reading{Value: 0.97, Used: 970, Limit: 1000} },
	}))
	now := time.Unix(1000, 0)
	m.Step(now)
	if v := m.EnterAt(now, levee.Sheddable, 0); v != overload.RefuseCriticalOnly {
		t.Fatalf("verdict %v, want critical_only", v)
	}
	m.Step(now.Add(2 * time.Second))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewOverloadCollector(m, WithConstLabels(prometheus.Labels{"server": "api"})))
	want := `
# HELP levee_overload_level Overload manager level: 0 normal, 1 elevated, 2 high, 3 critical (only CRITICAL_PLUS and health probes served).
# TYPE levee_overload_level gauge
levee_overload_level{server="api"} 3
# HELP levee_overload_resource_used What a resource has in use, in its own unit (memory: bytes; goroutines; open_files: descriptors); 0 when unknown.
# TYPE levee_overload_resource_used gauge
levee_overload_resource_used{server="api",signal="memory"} 970
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "levee_overload_level", "levee_overload_resource_used"); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 1 level, 4 for the resource, 2 per action, 12 refusals, 3 single values.
	if want := 1 + 4 + 2*overload.NumActions + 12 + 3; n != want {
		t.Errorf("%d samples, want %d", n, want)
	}
	if got := testutil.ToFloat64(newSingle(t, reg, "levee_overload_action_active_seconds_total", "critical_only")); got != 2 {
		t.Errorf("critical_only active %v s, want 2", got)
	}
}

// newSingle returns a collector of the one sample of name whose kind
// label is kind, gathered from reg.
func newSingle(t *testing.T, reg *prometheus.Registry, name, kind string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "kind" && lp.GetValue() == kind {
					g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x"})
					g.Set(mt.GetCounter().GetValue())
					return g
				}
			}
		}
	}
	t.Fatalf("%s{kind=%q}: not gathered", name, kind)
	return nil
}
