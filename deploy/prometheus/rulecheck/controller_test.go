package rulecheck

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveeprom"
)

// cpu is a fluid model of a server's CPU for the scenarios: admitted
// requests add a unit of work to a backlog, the server does capacity/0.8
// units a second, and the signal is the utilisation over each 50 ms sample,
// read one sample late, with ±5% noise; at capacity admitted requests a
// second it sits at its 0.8 target.
type cpu struct {
	capacity     float64
	backlog      float64
	busy, window float64
	last, value  float64
	rng          *rand.Rand
}

func (c *cpu) Name() string    { return "cpu" }
func (c *cpu) Value() float64  { return c.value }
func (c *cpu) Target() float64 { return 0.8 }

// advance runs the server for dt seconds and reports whether a sample
// ended.
func (c *cpu) advance(dt float64) bool {
	rate := c.capacity / 0.8
	done := math.Min(c.backlog, rate*dt)
	c.backlog -= done
	c.busy += done
	c.window += dt
	if c.window < 0.05-1e-9 {
		return false
	}
	c.value = c.last * (1 + 0.1*(c.rng.Float64()-0.5))
	c.last = c.busy / (rate * c.window)
	c.busy, c.window = 0, 0
	return true
}

// flow is a stream of Poisson arrivals, rate requests a second, of one
// criticality (0 = no header, so CRITICAL) and tenant ("" = none).
type flow struct {
	rate   float64
	crit   levee.Criticality
	tenant string
}

// scenario is a controller under one workload for 30 minutes of virtual
// time, scraped every 15 s like a Prometheus server would.
type scenario struct {
	name     string
	capacity float64
	flows    []flow
	fires    []string // alerts that must be firing at the end
	never    []string // alerts that must never fire
}

const (
	scrapeEvery = 15 * time.Second
	simLength   = 30 * time.Minute
)

// simulate runs s and returns its scrapes in promqltest's load syntax.
func (s scenario) simulate(t *testing.T) string {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	sig := &cpu{capacity: s.capacity, rng: rng}
	ctl := admit.New(admit.WithSignals(sig), admit.WithSeed(3))
	reg := prometheus.NewRegistry()
	reg.MustRegister(leveeprom.NewAdmitCollector(ctl))
	ctxs := make([]context.Context, len(s.flows))
	for i, f := range s.flows {
		ctx := context.Background()
		if f.crit != 0 {
			ctx = levee.WithCriticality(ctx, f.crit)
		}
		if f.tenant != "" {
			ctx = levee.WithTenant(ctx, f.tenant)
		}
		ctxs[i] = ctx
	}
	t0 := time.Unix(1_800_000_000, 0)
	const tick = 5 * time.Millisecond
	values := map[string][]string{}
	scrapes := 0
	for at := time.Duration(0); at <= simLength; at += tick {
		now := t0.Add(at)
		for i, f := range s.flows {
			for range poisson(rng, f.rate*tick.Seconds()) {
				if tk, err := ctl.AdmitAt(ctxs[i], now); err == nil {
					sig.backlog++
					tk.DoneAt(now, nil)
				}
			}
		}
		if sig.advance(tick.Seconds()) {
			ctl.Step(now)
		}
		if at%scrapeEvery == 0 {
			scrape(t, reg, values, scrapes)
			scrapes++
		}
	}
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "load %v\n", scrapeEvery)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s %s\n", k, strings.Join(values[k], " "))
	}
	return b.String()
}

// scrape gathers reg and appends each series' value as the n-th sample
// ("_", no sample, for series that appeared later).
func scrape(t *testing.T, reg *prometheus.Registry, values map[string][]string, n int) {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			l := []string{`instance="sim:8080"`, `job="api"`}
			for _, lp := range m.GetLabel() {
				l = append(l, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			slices.Sort(l)
			key := mf.GetName() + "{" + strings.Join(l, ",") + "}"
			v := m.GetGauge().GetValue()
			if m.Counter != nil {
				v = m.GetCounter().GetValue()
			}
			for len(values[key]) < n {
				values[key] = append(values[key], "_")
			}
			values[key] = append(values[key], strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
}

func poisson(rng *rand.Rand, lambda float64) int {
	l, k, p := math.Exp(-lambda), 0, 1.0
	for {
		p *= rng.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// TestRulesOnController runs a real admission controller on virtual time
// under several workloads, scrapes leveeprom every 15 s, and evaluates the
// rules on the scrapes with Prometheus's rule engine once a minute: the
// page must stay silent through the ladder's real dynamics (its noise at a
// level boundary included), and the tickets must fire.
func TestRulesOnController(t *testing.T) {
	scenarios := []scenario{
		{
			name:     "default criticality at 2x capacity",
			capacity: 200,
			flows:    []flow{{rate: 400}},
			fires:    []string{"LeveeSheddingCritical", "LeveeLowHeadroom", "LeveeSheddingTooLong"},
			never:    []string{"LeveeSheddingOrderInverted", "LeveeSheddingCriticalPlus"},
		},
		{
			// 2x capacity, a quarter SHEDDABLE and a quarter SHEDDABLE_PLUS:
			// the controller sits at the SHEDDABLE_PLUS / CRITICAL boundary
			// and its noise moves it back and forth across it.
			name:     "mixed criticalities at a level boundary",
			capacity: 200,
			flows:    []flow{{100, levee.Sheddable, ""}, {100, levee.SheddablePlus, ""}, {200, levee.Critical, ""}},
			never:    []string{"LeveeSheddingOrderInverted", "LeveeSheddingCriticalPlus"},
		},
		{
			name:     "mixed criticalities at 3x capacity",
			capacity: 200,
			flows:    []flow{{150, levee.Sheddable, ""}, {150, levee.SheddablePlus, ""}, {250, levee.Critical, ""}, {50, levee.CriticalPlus, ""}},
			fires:    []string{"LeveeSheddingCritical"},
			never:    []string{"LeveeSheddingOrderInverted", "LeveeSheddingCriticalPlus"},
		},
		{
			// One tenant sends CRITICAL traffic at 5x its fair share among
			// tenants whose traffic is SHEDDABLE: levee cuts the heavy
			// tenant's CRITICAL requests while it admits SHEDDABLE ones. By
			// design: a ticket, no page.
			name:     "a heavy tenant's CRITICAL traffic cut",
			capacity: 400,
			flows: []flow{
				{600, levee.Critical, "heavy"},
				{40, levee.Sheddable, "a"}, {40, levee.Sheddable, "b"}, {40, levee.Sheddable, "c"}, {40, levee.Sheddable, "d"},
			},
			fires: []string{"LeveeTenantShedding"},
			never: []string{"LeveeSheddingOrderInverted", "LeveeSheddingCriticalPlus"},
		},
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			firing := map[string][]time.Duration{}
			e := evaluation{
				load:      s.simulate(t),
				ruleFiles: []string{rulesFile},
				interval:  time.Minute,
				every:     time.Minute,
				until:     simLength,
				after: func(at time.Duration, groups []*rules.Group) {
					for _, g := range groups {
						for _, r := range g.Rules() {
							if ar, ok := r.(*rules.AlertingRule); ok {
								for _, a := range ar.ActiveAlerts() {
									if a.State == rules.StateFiring {
										firing[ar.Name()] = append(firing[ar.Name()], at)
									}
								}
							}
						}
					}
				},
				atEnd: func(suite *promqltest.LazyLoader) {
					// The ladder's shed share by criticality the page compares.
					q, err := suite.QueryEngine().NewInstantQuery(context.Background(), suite.Queryable(), nil,
						"levee:ladder_shed_ratio:rate5m", time.Unix(0, 0).UTC().Add(simLength))
					if err != nil {
						t.Fatal(err)
					}
					res := q.Exec(context.Background())
					if res.Err != nil {
						t.Fatal(res.Err)
					}
					v, _ := res.Vector()
					for _, smp := range v {
						t.Logf("5-minute ladder shed share of %s at the end: %.3f", smp.Metric.Get("criticality"), smp.F)
					}
				},
			}
			for _, err := range e.run() {
				t.Fatal(err)
			}
			for _, a := range s.never {
				if len(firing[a]) > 0 {
					t.Errorf("%s fired at %v", a, firing[a])
				}
			}
			for _, a := range s.fires {
				if !slices.Contains(firing[a], simLength) {
					t.Errorf("%s not firing at the end (fired at %v)", a, firing[a])
				}
			}
			var fired []string
			for a := range firing {
				fired = append(fired, a)
			}
			sort.Strings(fired)
			t.Logf("fired: %v", fired)
		})
	}
}
