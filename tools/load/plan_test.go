package load

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

// model is a service of capacity c requests/s for the planner's tests, on
// no clock at all: below c it follows the load with a 5 ms p99; above, a
// queue grows by (r − c) a second, its waiting time shows in the p99, and
// once the wait passes the clients' 1 s timeout goodput collapses.
type model struct {
	clock    time.Time
	c        float64
	step     time.Duration
	cpuPer   float64 // CPU seconds per request
	idle     float64 // utilisation with no load
	cpuSecs  float64
	measured []float64
	// noisy steps (indexes into measured) see a 1 s stall: a neighbour
	// took the machine.
	noisy map[int]bool
}

func (m *model) phase(name string, r float64) report.Phase {
	good, p99 := r, 0.005
	if r > m.c {
		wait := (r/m.c - 1) * m.step.Seconds()
		p99 = 0.005 + 0.99*min(wait, 1)
		good = m.c
		if wait > 1 {
			good = m.c / wait
		}
	}
	return report.Phase{Name: name, EndS: m.step.Seconds(),
		Rates:   report.Rates{OfferedRPS: r, AttemptedRPS: r, GoodputRPS: report.Round(good), FailedRPS: report.Round(r - good)},
		Latency: report.Latency{P99: report.RoundSeconds(p99)}}
}

func (m *model) measure(_ context.Context, name string, r float64) (stepResult, error) {
	m.measured = append(m.measured, r)
	m.clock = m.clock.Add(m.step + time.Second)
	before := CPUReading{Seconds: m.cpuSecs}
	served := min(r, m.c) * m.step.Seconds()
	m.cpuSecs += served * m.cpuPer
	after := CPUReading{Seconds: m.cpuSecs, Utilisation: m.idle + min(r, m.c)*m.cpuPer}
	ph := m.phase(name, r)
	if m.noisy[len(m.measured)-1] {
		ph.Latency.P99 += 1
	}
	run := report.Run{Phases: []report.Phase{ph}, Series: report.Series{BucketS: 1}}
	return stepResult{run: run, attempted: int64(r * m.step.Seconds()), before: &before, after: &after}, nil
}

func newModelPlanner(t *testing.T, m *model, cfg PlanConfig) *planner {
	t.Helper()
	cfg.Target = HTTP{URL: "http://127.0.0.1/"}
	if err := cfg.defaults(); err != nil {
		t.Fatal(err)
	}
	m.clock = time.Unix(0, 0)
	p := &planner{cfg: cfg, deadline: m.clock.Add(time.Hour), now: func() time.Time { return m.clock }}
	p.measure = m.measure
	p.settle = func(context.Context) error { return nil }
	p.check = func(_ context.Context, normal, over float64) (report.Run, error) {
		// A metastable service: after the overload, goodput stays at
		// 10% of the normal load.
		var run report.Run
		for _, ph := range []struct {
			name string
			r, g float64
			n    int
		}{{"normal", normal, normal, 10}, {"overload", over, m.c, 5}, {"after", normal, 0.1 * normal, 15}} {
			run.Append(report.Run{Phases: []report.Phase{{Name: ph.name, EndS: float64(ph.n), Rates: report.Rates{OfferedRPS: ph.r, GoodputRPS: ph.g}}},
				Series: report.Series{BucketS: 1, OfferedRPS: fill(ph.n, ph.r), GoodputRPS: fill(ph.n, ph.g)}})
		}
		return run, nil
	}
	return p
}

func fill(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestPlanFindsTheKnee(t *testing.T) {
	for _, c := range []float64{37, 1000, 23456} {
		m := &model{c: c, step: 5 * time.Second, cpuPer: 0.0008, idle: 0.02}
		p := newModelPlanner(t, m, PlanConfig{Start: 10, Max: 200000, Limits: Limits{MaxRate: 200000}, CPU: &ProcessCPU{}, Retry: ClientNaive, Retries: 2, PeakRPS: 10 * c})
		rep := p.plan(context.Background())
		s := rep.Plan
		// The knee: a step that met the SLO within Precision of the rate
		// that broke it. With this model the SLO (p99 200 ms) breaks at
		// c·(1 + 0.2/5): the knee is c within 5%.
		if s.KneeRPS < 0.95*c || s.KneeRPS > c {
			t.Errorf("c %v: knee %v, want in [0.95c, c]", c, s.KneeRPS)
		}
		// Breaking: the first rate whose goodput is < 90% of it: > c/0.9,
		// and the past steps are at most 1.25× the knee.
		if s.BreakingRPS <= c/0.9 || s.BreakingRPS > 1.25*c {
			t.Errorf("c %v: breaking point %v, want in (c/0.9, 1.25c]", c, s.BreakingRPS)
		}
		// At 2× the knee the queue's wait passes the timeout: goodput
		// collapses past the breaking point.
		if s.PastGoodputShare > 0.6 || s.PeakGoodputRPS < 0.95*c {
			t.Errorf("c %v: past goodput share %v of peak %v, want ≤ 0.6 (collapse) and peak ≈ c", c, s.PastGoodputShare, s.PeakGoodputRPS)
		}
		if n := len(m.measured); n > 40 {
			t.Errorf("c %v: %d steps, want a bounded schedule", c, n)
		}
		if mt := s.Metastability; mt == nil || mt.Recovered || mt.RecoveryS != nil || mt.AfterGoodputShare != 0.1 || mt.OverloadRPS != report.Round(2*s.KneeRPS) {
			t.Errorf("c %v: metastability %+v, want not recovered, 10%% of goodput after, overload 2× the knee", c, mt)
		}
		// Utilisations are read to 3 decimals: the slope is within 1%.
		if s.CPU == nil || s.CPU.PerRequestS != 0.0008 || math.Abs(s.CPU.UtilisationPerRPS-0.0008) > 8e-6 ||
			math.Abs(s.CPU.UtilisationAtKnee-(0.02+0.0008*s.KneeRPS)) > 0.01*(0.02+0.0008*s.KneeRPS)+0.001 {
			t.Errorf("c %v: cpu %+v, want 0.0008 s per request, 0.0008 utilisation per request/s, %.3f at the knee", c, s.CPU, 0.02+0.0008*s.KneeRPS)
		}
		if want := math.Floor(100*s.CPU.UtilisationAtKnee) / 100; s.Threshold.CPUTarget != want || s.Threshold.RPS != s.KneeRPS {
			t.Errorf("c %v: threshold %+v, want %v at the knee", c, s.Threshold, want)
		}
		if s.Sizing == nil || s.Sizing.N != int(math.Ceil(10*c/s.KneeRPS)) {
			t.Errorf("c %v: sizing %+v", c, s.Sizing)
		}
		if len(rep.Runs) != 2 || len(rep.Runs[0].Phases) != len(s.Steps) || rep.Trigger != "overload" {
			t.Errorf("c %v: report has %d runs, %d step phases for %d steps, trigger %q", c, len(rep.Runs), len(rep.Runs[0].Phases), len(s.Steps), rep.Trigger)
		}
	}
}

// One noisy step below the capacity does not lower the knee: a break is
// measured twice before the plan believes it.
func TestPlanConfirmsABreak(t *testing.T) {
	m := &model{c: 1000, step: 5 * time.Second, noisy: map[int]bool{5: true}}
	p := newModelPlanner(t, m, PlanConfig{Start: 10})
	s := p.plan(context.Background()).Plan
	if s.KneeRPS < 950 || s.KneeRPS > 1000 {
		t.Errorf("knee %v, want ≈ 1000 despite a noisy step", s.KneeRPS)
	}
	if !s.Steps[6].Confirm || s.Steps[6].OfferedRPS != s.Steps[5].OfferedRPS || s.Steps[5].MeetsSLO {
		t.Errorf("steps 5 and 6: %+v, %+v; want the noisy step broken, then confirmed at the same rate", s.Steps[5], s.Steps[6])
	}
}

func TestPlanNoBreakBelowMax(t *testing.T) {
	m := &model{c: 1e6, step: time.Second}
	p := newModelPlanner(t, m, PlanConfig{Start: 100, Max: 500})
	s := p.plan(context.Background()).Plan
	if s.KneeRPS != 500 || s.BreakingRPS != 0 || s.Reason == "" || s.Metastability != nil {
		t.Errorf("plan %+v, want knee 500 (the maximum), no breaking point, a reason, no metastability check", s)
	}
	if last := m.measured[len(m.measured)-1]; last != 500 {
		t.Errorf("last step at %v, want the maximum 500", last)
	}
}

func TestPlanStartTooHigh(t *testing.T) {
	m := &model{c: 50, step: 5 * time.Second}
	p := newModelPlanner(t, m, PlanConfig{Start: 400})
	s := p.plan(context.Background()).Plan
	if s.KneeRPS < 0.95*50 || s.KneeRPS > 50 {
		t.Errorf("knee %v, want ≈ 50 after starting too high", s.KneeRPS)
	}
	// The first rate broke the SLO twice (measured, then confirmed):
	// the third step is lower.
	if m.measured[1] != m.measured[0] || m.measured[2] >= m.measured[0] {
		t.Errorf("steps %v: want the first rate confirmed, then a lower one", m.measured)
	}
	if s.Steps[1].Confirm != true || s.Steps[0].Confirm {
		t.Errorf("steps %+v: want the second marked as the confirmation", s.Steps[:2])
	}
}

func TestPlanBudget(t *testing.T) {
	m := &model{c: 1000, step: 5 * time.Second}
	p := newModelPlanner(t, m, PlanConfig{Start: 10})
	p.deadline = m.clock.Add(13 * time.Second) // two steps of 5 s + 1 s of timeout
	s := p.plan(context.Background()).Plan
	if !s.Stopped || len(s.Steps) != 2 {
		t.Errorf("stopped %v after %d steps, want stopped after 2 (budget)", s.Stopped, len(s.Steps))
	}
}

func TestPlanConfigErrors(t *testing.T) {
	for _, c := range []PlanConfig{
		{Growth: 1.01}, {Growth: 5}, {Start: 100, Max: 10}, {Step: time.Millisecond}, {Retry: "smart"},
		{Limits: Limits{MaxRate: -1}},
	} {
		if err := c.defaults(); err == nil {
			t.Errorf("defaults(%+v): err = nil", c)
		}
	}
}

// The sizing of the plan, by hand.
func TestSize(t *testing.T) {
	tests := []struct {
		peak, per                    float64
		n, nPlus2, perSite, twoSites int
	}{
		// 10000 ÷ 1200 = 8.33 → 9; N+2 = 11; each site carries the whole
		// peak alone: 9 per site, 18 in all.
		{10000, 1200, 9, 11, 9, 18},
		// A whole ratio needs no extra instance: 10000 ÷ 1000 = 10.
		{10000, 1000, 10, 12, 10, 20},
		// The seed's avalanche: 10000 at peak, instances of 5000.
		{10000, 5000, 2, 4, 2, 4},
		// One instance is plenty, and still N+2 = 3.
		{10, 1000, 1, 3, 1, 2},
		{0.3, 0.1, 3, 5, 3, 6},
	}
	for _, tt := range tests {
		got := Size(tt.peak, tt.per)
		want := Sizing{PeakRPS: tt.peak, PerInstanceRPS: tt.per, N: tt.n, NPlus2: tt.nPlus2, PerSite: tt.perSite, TwoSites: tt.twoSites}
		if got != want {
			t.Errorf("Size(%v, %v) = %+v, want %+v", tt.peak, tt.per, got, want)
		}
	}
	for _, bad := range [][2]float64{{0, 10}, {10, 0}, {-1, 10}, {math.NaN(), 1}, {math.Inf(1), 1}} {
		if got := Size(bad[0], bad[1]); got != (Sizing{}) {
			t.Errorf("Size(%v, %v) = %+v, want zero", bad[0], bad[1], got)
		}
	}
}

func TestParseStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50
	// ticks: 3 s.
	line := "1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 100 0 0\n"
	got, err := parseStat([]byte(line))
	if err != nil || got != 3 {
		t.Errorf("parseStat = %v, %v; want 3", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x y"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q): err = nil", bad)
		}
	}
}

func TestStatusCPU(t *testing.T) {
	doc := `{"interval_s":1,"current":{"seq":3,"signals":[{"name":"sched_latency","value":0.002},{"name":"cpu","value":0.73,"target":0.8}]},"history":[]}`
	if got, err := statusCPU([]byte(doc)); err != nil || got != 0.73 {
		t.Errorf("statusCPU = %v, %v; want 0.73", got, err)
	}
	for _, bad := range []string{`[]`, `{}`, `{"current":{}}`, `{"current":{"signals":[{"name":"queue_delay","value":1}]}}`, `{"current":{"signals":[{"name":"cpu","value":"x"}]}}`} {
		if _, err := statusCPU([]byte(bad)); err == nil {
			t.Errorf("statusCPU(%s): err = nil", bad)
		}
	}
}

// TestServedWithin: a step's goodput counts what completed while it lasted,
// not the queue it left behind.
func TestServedWithin(t *testing.T) {
	res := &Result{Resolution: 100 * time.Millisecond}
	for i := 0; i < 40; i++ { // 4 s of buckets: 50 served in each of the first 30, 80 in the last 10 (the queue draining)
		n := int64(50)
		if i >= 30 {
			n = 80
		}
		res.Series = append(res.Series, Bucket{Served: n})
	}
	if got := servedWithin(res, 3*time.Second); got != 500 {
		t.Errorf("served within 3 s = %v/s, want 500", got)
	}
	if got := servedWithin(&Result{}, 3*time.Second); got != 0 {
		t.Errorf("no series: %v, want 0", got)
	}
}
