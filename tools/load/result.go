package load

import (
	"sort"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/levee-dev/levee/tools/report"
)

// Result is what a run measured, as the generator counted it: per-phase
// totals and a time series. It marshals to JSON as is (the loopback lab
// sends it between processes); Run turns it into levee's report schema.
type Result struct {
	// Start is when the first phase began; Series and phase offsets count
	// from it.
	Start time.Time `json:"start"`
	// Resolution is the width of a Series bucket.
	Resolution time.Duration `json:"resolution"`
	Phases     []PhaseStats  `json:"phases"`
	Series     []Bucket      `json:"series"`
	// GenErrors counts generator errors over the whole run (also in the
	// phases). A run with generator errors overstates the failures.
	GenErrors int64 `json:"generator_errors"`
	// MaxLag is how far behind its schedule the arrival process fell at
	// worst. Latency is measured from the schedule, so lag is part of it.
	MaxLag time.Duration `json:"max_lag"`
	// Cancelled counts requests still in flight when the drain (or, for a
	// stopped run, the grace period) ended.
	Cancelled int64 `json:"cancelled"`
	// Stopped says the run was interrupted: the phases cover what ran,
	// phases that never started are left out.
	Stopped bool `json:"stopped,omitempty"`
}

// PhaseStats are the totals of the requests offered in one phase, whatever
// the time they completed at.
type PhaseStats struct {
	Name   string        `json:"name"`
	Offset time.Duration `json:"offset"`
	// Duration is how long the phase ran: its length, or less if the run
	// was stopped during it.
	Duration time.Duration `json:"duration"`
	// Tally counts the outcomes; its Failed leaves out GenErrors.
	report.Tally
	GenErrors int64 `json:"generator_errors"`
	// FailedBy counts the Failed outcomes by class (Failure's names).
	FailedBy map[string]int64 `json:"failed_by,omitempty"`
	// Latency of the successful requests, from their scheduled time.
	Latency report.Latency `json:"latency_s"`
	// ByCriticality (shed first → last) and ByTenant (the mix's order)
	// count each class; present when the mix had more than one.
	ByCriticality []ClassStats `json:"by_criticality,omitempty"`
	ByTenant      []ClassStats `json:"by_tenant,omitempty"`
}

// ClassStats are one class's totals in a phase.
type ClassStats struct {
	Name string `json:"name"`
	report.Tally
	GenErrors int64 `json:"generator_errors,omitempty"`
}

// Rate returns n per second of the phase's duration (0 for an empty phase).
func (p PhaseStats) Rate(n int64) float64 {
	if p.Duration <= 0 {
		return 0
	}
	return float64(n) / p.Duration.Seconds()
}

// Bucket is one Resolution-wide slice of a run. Offered and the outcomes
// count requests by their scheduled time; Attempted counts attempts by the
// time they were sent; Served counts successes by the time they completed,
// P99 their latency's 99th percentile (2 significant digits).
type Bucket struct {
	// Tally counts the outcomes; its Failed includes generator errors.
	report.Tally
	Served int64         `json:"served"`
	P99    time.Duration `json:"p99,omitempty"`
}

// quantiles are the points of a phase's latency distribution in reports.
var quantiles = []float64{50, 75, 90, 95, 99, 99.9, 99.99, 100}

func latency(h *hdrhistogram.Histogram) report.Latency {
	if h.TotalCount() == 0 {
		return report.Latency{}
	}
	s := func(us int64) float64 { return report.RoundSeconds(float64(us) / 1e6) }
	l := report.Latency{
		Mean: report.RoundSeconds(h.Mean() / 1e6),
		P50:  s(h.ValueAtQuantile(50)), P90: s(h.ValueAtQuantile(90)), P99: s(h.ValueAtQuantile(99)),
		P999: s(h.ValueAtQuantile(99.9)), Max: s(h.Max()),
	}
	for _, q := range quantiles {
		l.Quantiles = append(l.Quantiles, report.Quantile{Q: q / 100, S: s(h.ValueAtQuantile(q))})
	}
	return l
}

func (cc *classCounters) tally() report.Tally {
	return report.Tally{
		Offered:   cc.offered.Load(),
		Attempted: cc.attempted.Load(),
		Throttled: cc.outcome[Throttled].Load(),
		Goodput:   cc.outcome[Goodput].Load(),
		Rejected:  cc.outcome[Rejected].Load(),
		Failed:    cc.outcome[Failed].Load(),
	}
}

// byRank returns the mix's criticality indexes in the order levee sheds
// them (Sheddable first).
func (m *compiled) byRank() []int {
	idx := make([]int, len(m.crits))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return m.crits[idx[a]].Rank() < m.crits[idx[b]].Rank() })
	return idx
}

func (g *generator) result(maxLag time.Duration, stopped bool, ran time.Duration) *Result {
	r := &Result{
		Start:      g.start,
		Resolution: g.res,
		MaxLag:     maxLag,
		Cancelled:  g.cancelled.Load(),
		GenErrors:  g.total[totalIdx+int(GenError)].Load(),
		Stopped:    stopped,
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushBucketLocked()
	for i, p := range g.cfg.Phases {
		d := min(p.Duration, ran-g.offsets[i])
		if d <= 0 {
			break
		}
		c := &g.phases[i]
		ps := PhaseStats{
			Name: p.Name, Offset: g.offsets[i], Duration: d,
			Tally:     c.all.tally(),
			GenErrors: c.all.outcome[GenError].Load(),
			Latency:   latency(g.hist[i]),
		}
		for f := range c.failure {
			if n := c.failure[f].Load(); n > 0 {
				if ps.FailedBy == nil {
					ps.FailedBy = map[string]int64{}
				}
				ps.FailedBy[Failure(f).String()] = n
			}
		}
		if len(g.mix.crits) > 1 {
			for _, k := range g.mix.byRank() {
				cc := &c.crit[k]
				ps.ByCriticality = append(ps.ByCriticality, ClassStats{Name: g.mix.crits[k].String(), Tally: cc.tally(), GenErrors: cc.outcome[GenError].Load()})
			}
		}
		if len(g.mix.tenants) > 1 {
			for k := range c.tenant {
				cc := &c.tenant[k]
				ps.ByTenant = append(ps.ByTenant, ClassStats{Name: g.mix.tenants[k], Tally: cc.tally(), GenErrors: cc.outcome[GenError].Load()})
			}
		}
		r.Phases = append(r.Phases, ps)
	}
	// Trim the idle tail of the series.
	n := len(g.buckets)
	for n > 0 && g.buckets[n-1].offered.Load() == 0 && g.buckets[n-1].served.Load() == 0 && g.buckets[n-1].attempted.Load() == 0 {
		n--
	}
	r.Series = make([]Bucket, n)
	for i := 0; i < n; i++ {
		b := &g.buckets[i]
		r.Series[i] = Bucket{
			Tally: report.Tally{
				Offered:   b.offered.Load(),
				Attempted: b.attempted.Load(),
				Goodput:   b.outcome[Goodput].Load(),
				Rejected:  b.outcome[Rejected].Load(),
				Throttled: b.outcome[Throttled].Load(),
				Failed:    b.outcome[Failed].Load() + b.outcome[GenError].Load(),
			},
			Served: b.served.Load(),
			P99:    b.p99,
		}
	}
	return r
}

// Run converts the result into a run of levee's one report schema
// (package report): per phase the rates, their split by criticality and
// tenant, the failures by class and the latency distribution; the series
// over time (with the p99 per bucket) and the outage. Generator errors
// count as failures there (class "generator"; Run.GeneratorErrors tells
// them apart). The caller names the run and sets its protection, client,
// capacity and, with report.Run.RecoveryAfter, its recovery.
func (r *Result) Run() report.Run {
	run := report.Run{
		GeneratorErrors: r.GenErrors,
		MaxLagS:         report.Round(r.MaxLag.Seconds()),
		Stopped:         r.Stopped,
	}
	for _, p := range r.Phases {
		secs := p.Duration.Seconds()
		t := p.Tally
		t.Failed += p.GenErrors
		run.Attempts += t.Attempted
		ph := report.Phase{
			Name:    p.Name,
			StartS:  report.Round(p.Offset.Seconds()),
			EndS:    report.Round((p.Offset + p.Duration).Seconds()),
			Rates:   t.Rates(secs),
			Latency: p.Latency,
		}
		for k, n := range p.FailedBy {
			if ph.FailedBy == nil {
				ph.FailedBy = map[string]float64{}
			}
			ph.FailedBy[k] = report.Round(float64(n) / secs)
		}
		if p.GenErrors > 0 {
			if ph.FailedBy == nil {
				ph.FailedBy = map[string]float64{}
			}
			ph.FailedBy[generatorFailure] = report.Round(float64(p.GenErrors) / secs)
		}
		ph.ByCriticality = classes(p.ByCriticality, secs)
		ph.ByTenant = classes(p.ByTenant, secs)
		run.Phases = append(run.Phases, ph)
	}
	ts := make([]report.Tally, len(r.Series))
	for i, b := range r.Series {
		ts[i] = b.Tally
	}
	run.Series = report.SeriesOf(ts, r.Resolution.Seconds())
	for _, b := range r.Series {
		if b.P99 > 0 {
			run.Series.P99S = make([]float64, len(r.Series))
			for i, b := range r.Series {
				run.Series.P99S[i] = report.RoundSeconds(b.P99.Seconds())
			}
			break
		}
	}
	run.OutageS = report.Outage(run.Series)
	return run
}

func classes(cs []ClassStats, secs float64) []report.Class {
	var out []report.Class
	for _, c := range cs {
		t := c.Tally
		t.Failed += c.GenErrors
		out = append(out, report.Class{Name: c.Name, Rates: t.Rates(secs)})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
