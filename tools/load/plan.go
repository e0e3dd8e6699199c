package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

// SLO is what a service promises its callers. A step of a plan meets it
// when both hold over the step.
type SLO struct {
	// P99 bounds the 99th percentile of the latency of successes, from
	// their scheduled time. Default 200ms.
	P99 time.Duration `json:"p99"`
	// ErrorRate bounds the share of offered requests that did not succeed
	// (rejected, throttled or failed). Default 0.01.
	ErrorRate float64 `json:"error_rate"`
}

// PlanConfig configures Plan. The zero value of each optional field means
// its default.
type PlanConfig struct {
	// Target describes the request (method, URL, headers, body, timeout).
	// Its Client and Retries are ignored: the ramp sends every request
	// once, so that retries do not inflate the load being measured.
	Target HTTP
	// Mix of criticalities and tenants of every step.
	Mix Mix
	// SLO the knee is measured against.
	SLO SLO
	// Start is the first step's rate; default 10 requests/s.
	Start float64
	// Max is the highest rate tried; default (and at most) Limits.MaxRate.
	Max float64
	// Step is the length of each step; default 5s.
	Step time.Duration
	// Growth is the ramp's factor from step to step; default 1.5, in
	// (1.05, 4].
	Growth float64
	// Precision ends the search for the knee when the rates that meet and
	// break the SLO are within this ratio; default 0.05.
	Precision float64
	// Settle bounds the wait, after a step that broke the SLO, until the
	// service answers within its SLO again; default 30s.
	Settle time.Duration
	// Retry is the client model of the metastability check (ClientNaive
	// with Retries, or ClientLevee); "" skips the check. The check offers
	// 0.7× the knee for two steps, then 2× it for one step, then 0.7×
	// again for three steps (at least 5 s and 8 s), and sees whether
	// goodput comes back.
	Retry   string
	Retries int
	// PeakRPS is the demand to size a fleet for; 0 skips the sizing.
	PeakRPS float64
	// CPU, if set, is read around every step to state the CPU cost of a
	// request.
	CPU CPUSource
	// Limits cap every step and the whole plan's duration (Budget).
	Limits Limits
	// Budget bounds the plan's total time, pauses included; default
	// Limits.MaxDuration.
	Budget time.Duration
	// OnStep, if set, is called after every step; Progress is passed to
	// every run.
	OnStep   func(PlanStep)
	Progress func(Progress)
}

// PlanStep is one step of a plan.
type PlanStep struct {
	// Stage is "ramp" (growing by Growth), "refine" (searching the knee)
	// or "past" (beyond the knee).
	Stage      string  `json:"stage"`
	OfferedRPS float64 `json:"offered_rps"`
	GoodputRPS float64 `json:"goodput_rps"`
	P99S       float64 `json:"p99_s"`
	ErrorRate  float64 `json:"error_rate"`
	MeetsSLO   bool    `json:"meets_slo"`
	// Saturated: goodput fell below 90% of the offered load: the service
	// no longer follows it.
	Saturated bool `json:"saturated"`
	// Confirm marks the second measurement of a rate whose first step
	// broke the SLO (the better of the two counts).
	Confirm bool `json:"confirm,omitempty"`
	// CPUPerRequestS (core-seconds) and Utilisation, when a CPU source
	// gave them.
	CPUPerRequestS float64 `json:"cpu_per_request_s,omitempty"`
	Utilisation    float64 `json:"utilisation,omitempty"`
}

// Metastability is the outcome of the metastability check: after an
// overload with retrying clients, does goodput come back when the load
// returns to normal?
type Metastability struct {
	Client      string  `json:"client"`
	Retries     int     `json:"retries,omitempty"`
	NormalRPS   float64 `json:"normal_rps"`
	OverloadRPS float64 `json:"overload_rps"`
	// RecoveryS is recovery_s after the overload (report.Recovery); null
	// when goodput never came back: the service is metastable, its retrying
	// clients keep it down.
	RecoveryS *float64 `json:"recovery_s"`
	Recovered bool     `json:"recovered"`
	// AfterGoodputShare is goodput ÷ offered over the phase after the
	// overload.
	AfterGoodputShare float64 `json:"after_goodput_share"`
}

// CPUCost is the CPU a request costs, from the steps that met the SLO.
type CPUCost struct {
	Source string `json:"source"`
	// PerRequestS is the median CPU time per request, core-seconds; 0
	// when the source gives utilisation only.
	PerRequestS float64 `json:"per_request_s,omitempty"`
	// UtilisationPerRPS is the slope of the utilisation of the allowed
	// cores over the offered rate (least squares with an intercept, the
	// idle use), and UtilisationAtKnee the line's value at the knee.
	UtilisationPerRPS float64 `json:"utilisation_per_rps,omitempty"`
	UtilisationAtKnee float64 `json:"utilisation_at_knee,omitempty"`
}

// PlanSummary is what a plan found, the "plan" section of its report.
type PlanSummary struct {
	SLO SLO `json:"slo"`
	// KneeRPS is the capacity at the SLO: the goodput of the highest step
	// that met it. 0 if no step did.
	KneeRPS float64 `json:"knee_rps"`
	// BreakingRPS is the lowest offered rate at which the service stopped
	// following the load (goodput < 90% of offered); 0 if it never did up
	// to MaxTriedRPS.
	BreakingRPS float64 `json:"breaking_rps"`
	MaxTriedRPS float64 `json:"max_tried_rps"`
	// PeakGoodputRPS is the highest goodput of any step; PastGoodputRPS
	// the goodput at the highest rate tried past the knee (PastRPS; 0
	// when no step went past it), and PastGoodputShare its share of
	// PeakGoodputRPS.
	PeakGoodputRPS   float64        `json:"peak_goodput_rps"`
	PastRPS          float64        `json:"past_rps"`
	PastGoodputRPS   float64        `json:"past_goodput_rps"`
	PastGoodputShare float64        `json:"past_goodput_share"`
	Metastability    *Metastability `json:"metastability,omitempty"`
	CPU              *CPUCost       `json:"cpu,omitempty"`
	Sizing           *Sizing        `json:"sizing,omitempty"`
	Threshold        Threshold      `json:"threshold"`
	Steps            []PlanStep     `json:"steps"`
	// Stopped: the plan was cut short (interrupted, or out of budget); the
	// figures cover the steps that ran.
	Stopped bool   `json:"stopped,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// PlanReport is a plan in levee's report schema: the steps as one run
// ("steps"), the metastability check as another ("metastability"), and
// the plan's findings.
type PlanReport struct {
	report.Report
	Plan PlanSummary `json:"plan"`
}

// errBudget ends a plan that would run past its budget.
var errBudget = errors.New("out of time budget")

type planner struct {
	cfg      PlanConfig
	deadline time.Time
	sum      PlanSummary
	steps    report.Run
	meta     *report.Run

	// The clock and the measurements: real in Plan, modelled in tests of
	// the planner's logic.
	now     func() time.Time
	measure func(ctx context.Context, name string, rate float64) (stepResult, error)
	settle  func(ctx context.Context) error
	check   func(ctx context.Context, normal, over float64) (report.Run, error)
}

// stepResult is what one step measured.
type stepResult struct {
	run report.Run
	// attempted counts the attempts of the step (one per request).
	attempted int64
	// cpu readings before and after the step, when a source gave them.
	before, after *CPUReading
	stopped       bool
	// served is the successes that completed while the step lasted, per
	// second of it (0: not measured).
	served float64
}

func (c *PlanConfig) defaults() error {
	l, err := c.Limits.orDefault()
	if err != nil {
		return err
	}
	c.Limits = l
	if c.SLO.P99 <= 0 {
		c.SLO.P99 = 200 * time.Millisecond
	}
	if c.SLO.ErrorRate <= 0 {
		c.SLO.ErrorRate = 0.01
	}
	if c.Start <= 0 {
		c.Start = 10
	}
	if c.Max <= 0 || c.Max > l.MaxRate {
		c.Max = l.MaxRate
	}
	if c.Step <= 0 {
		c.Step = 5 * time.Second
	}
	if c.Growth == 0 {
		c.Growth = 1.5
	}
	if c.Precision <= 0 {
		c.Precision = 0.05
	}
	if c.Settle <= 0 {
		c.Settle = 30 * time.Second
	}
	if c.Budget <= 0 || c.Budget > l.MaxDuration {
		c.Budget = l.MaxDuration
	}
	switch {
	case !(c.Growth > 1.05 && c.Growth <= 4):
		return fmt.Errorf("load: plan growth %v out of (1.05, 4]", c.Growth)
	case c.Start > c.Max:
		return fmt.Errorf("load: plan starts at %v requests/s, above its maximum %v", c.Start, c.Max)
	case c.Step < 500*time.Millisecond:
		return fmt.Errorf("load: plan steps of %v, want ≥ 500ms", c.Step)
	case c.Retry != "" && c.Retry != ClientNaive && c.Retry != ClientLevee && c.Retry != ClientNone:
		return fmt.Errorf("load: metastability clients %q: want naive, levee or none", c.Retry)
	}
	return nil
}

// Plan finds a service's capacity and breaking point and turns them into
// a plan:
//
//  1. ramp: steps of cfg.Step growing by cfg.Growth from cfg.Start, each
//     request sent once, until a step breaks the SLO or stops following
//     the load (or cfg.Max);
//  2. refine: bisect between the last step that met the SLO and the first
//     that broke it until they are within cfg.Precision: the knee;
//  3. past: steps at 1.25×, 1.6× and 2× the knee: the breaking point and
//     the goodput past it;
//  4. metastability (with cfg.Retry clients): 0.7× knee, 2× knee, 0.7×
//     knee (metastabilityPhases), and whether goodput comes back;
//  5. the CPU cost per request (cfg.CPU), the sizing (cfg.PeakRPS) and the
//     shedding threshold.
//
// A step of the ramp or the search that breaks the SLO is measured once
// more before the plan believes it (judge). After a step that broke the
// SLO, Plan waits (at most cfg.Settle) until
// single requests are answered within the SLO again, so that a queue left
// by one step does not spoil the next. The whole plan stays within
// cfg.Budget; cancelling ctx stops it, and the report covers what ran
// (PlanSummary.Stopped).
func Plan(ctx context.Context, cfg PlanConfig) (*PlanReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	once := cfg.Target
	once.Client, once.Retries = ClientNone, 0
	h, err := NewHTTP(once)
	if err != nil {
		return nil, err
	}
	defer h.CloseIdleConnections()
	p := &planner{cfg: cfg, deadline: time.Now().Add(cfg.Budget), now: time.Now}
	live := &livePlan{cfg: &p.cfg, once: h}
	p.measure, p.settle, p.check = live.measure, live.settle, live.check
	return p.plan(ctx), nil
}

// plan runs the plan and returns its report.
func (p *planner) plan(ctx context.Context) *PlanReport {
	p.sum.SLO = p.cfg.SLO
	err := p.run(ctx)
	if err != nil {
		p.sum.Stopped = true
		p.sum.Reason = err.Error()
		if ctx.Err() != nil {
			p.sum.Reason = "interrupted"
		}
	}
	return p.report()
}

func (p *planner) run(ctx context.Context) error {
	lastOK, broke, err := p.ramp(ctx)
	if err != nil {
		return err
	}
	if broke != nil && lastOK != nil {
		if lastOK, err = p.refine(ctx, lastOK, broke); err != nil {
			return err
		}
	}
	if lastOK != nil {
		p.sum.KneeRPS = report.Round(lastOK.GoodputRPS)
	}
	if broke == nil {
		// Nothing to step past, and no overload within the maximum to
		// check recovery from.
		p.sum.Reason = fmt.Sprintf("the service met its SLO up to the maximum rate tried, %.0f requests/s", p.cfg.Max)
		return nil
	}
	if p.sum.KneeRPS > 0 {
		if err := p.past(ctx); err != nil {
			return err
		}
	}
	if p.cfg.Retry != "" && p.sum.KneeRPS > 0 {
		if err := p.metastability(ctx); err != nil {
			return err
		}
	}
	return nil
}

// ramp grows the rate until a step breaks the SLO or saturates. It
// returns the last step that met the SLO and the one that broke it (nil
// if none did below Max). A first step already broken is retried at a
// lower rate.
func (p *planner) ramp(ctx context.Context) (lastOK, broke *PlanStep, err error) {
	rate := p.cfg.Start
	for {
		s, err := p.judge(ctx, "ramp", rate)
		if err != nil {
			return lastOK, broke, err
		}
		if s.ok() {
			lastOK = s
			if rate >= p.cfg.Max {
				return lastOK, nil, nil
			}
			rate = min(rate*p.cfg.Growth, p.cfg.Max)
			continue
		}
		broke = s
		if lastOK != nil || rate < 1 {
			return lastOK, broke, nil
		}
		if err := p.wait(ctx); err != nil {
			return nil, broke, err
		}
		rate /= p.cfg.Growth * p.cfg.Growth
	}
}

// refine bisects (geometrically) between a step that met the SLO and one
// that broke it.
func (p *planner) refine(ctx context.Context, ok, broke *PlanStep) (*PlanStep, error) {
	lo, hi := ok.OfferedRPS, broke.OfferedRPS
	for i := 0; i < 8 && hi/lo > 1+p.cfg.Precision; i++ {
		if err := p.wait(ctx); err != nil {
			return ok, err
		}
		mid := math.Sqrt(lo * hi)
		s, err := p.judge(ctx, "refine", mid)
		if err != nil {
			return ok, err
		}
		if s.ok() {
			lo, ok = mid, s
		} else {
			hi = mid
		}
	}
	return ok, nil
}

// past offers 1.25×, 1.6× and 2× the knee.
func (p *planner) past(ctx context.Context) error {
	for _, x := range []float64{1.25, 1.6, 2} {
		rate := x * p.sum.KneeRPS
		if rate > p.cfg.Max {
			break
		}
		if err := p.wait(ctx); err != nil {
			return err
		}
		if _, err := p.step(ctx, "past", rate); err != nil {
			return err
		}
	}
	return nil
}

// metastability offers 0.7× the knee, 2× it for a step, and 0.7× again for
// three steps, with the configured retrying clients.
func (p *planner) metastability(ctx context.Context) error {
	if err := p.wait(ctx); err != nil {
		return err
	}
	normal, over := 0.7*p.sum.KneeRPS, min(2*p.sum.KneeRPS, p.cfg.Max)
	m := &Metastability{Client: p.cfg.Retry, NormalRPS: report.Round(normal), OverloadRPS: report.Round(over)}
	if p.cfg.Retry == ClientNaive {
		m.Retries = p.cfg.Retries
	}
	var length time.Duration
	for _, ph := range metastabilityPhases(p.cfg.Step, normal, over) {
		length += ph.Duration
	}
	if err := p.fits(length + time.Duration(m.Retries+1)*p.cfg.Target.timeout()); err != nil {
		return err
	}
	run, err := p.check(ctx, normal, over)
	if len(run.Phases) == 0 {
		return err
	}
	run.Name, run.Protection, run.Client = "metastability", "unknown", p.cfg.Retry
	m.RecoveryS = run.RecoveryAfter("overload")
	run.RecoveryS = m.RecoveryS
	m.Recovered = m.RecoveryS != nil
	if after, ok := run.Phase("after"); ok {
		m.AfterGoodputShare = report.Share(after.GoodputRPS, after.OfferedRPS)
	}
	p.sum.Metastability = m
	p.meta = &run
	return err
}

// fits returns errBudget if d does not fit in what is left of the budget.
func (p *planner) fits(d time.Duration) error {
	if p.now().Add(d).After(p.deadline) {
		return fmt.Errorf("%w (%v)", errBudget, p.cfg.Budget)
	}
	return nil
}

// judge measures a step and, if it broke the SLO or saturated, measures
// it once more after the service settled: noise on a shared machine only
// adds latency and failures, so one bad step is confirmed before the plan
// believes it. It returns the better of the two.
func (p *planner) judge(ctx context.Context, stage string, rate float64) (*PlanStep, error) {
	s, err := p.step(ctx, stage, rate)
	if err != nil || s.ok() {
		return s, err
	}
	if err := p.wait(ctx); err != nil {
		return s, err
	}
	again, err := p.step(ctx, stage, rate)
	if err != nil {
		return s, err
	}
	p.sum.Steps[len(p.sum.Steps)-1].Confirm = true
	if again.ok() {
		return again, nil
	}
	return s, nil
}

// ok says whether a step met the SLO and followed the load.
func (s *PlanStep) ok() bool { return s.MeetsSLO && !s.Saturated }

// step offers rate for one step with single-attempt clients and records
// it.
func (p *planner) step(ctx context.Context, stage string, rate float64) (*PlanStep, error) {
	rate = min(rate, p.cfg.Max)
	if err := p.fits(p.cfg.Step + p.cfg.Target.timeout()); err != nil {
		return nil, err
	}
	r, err := p.measure(ctx, fmt.Sprintf("%s %.0f/s", stage, rate), rate)
	if err != nil {
		return nil, err
	}
	if len(r.run.Phases) == 0 {
		return nil, ctx.Err()
	}
	ph := r.run.Phases[0]
	s := &PlanStep{
		Stage:      stage,
		OfferedRPS: ph.OfferedRPS,
		GoodputRPS: ph.GoodputRPS,
		P99S:       ph.Latency.P99,
		ErrorRate:  report.Share(ph.OfferedRPS-ph.GoodputRPS, ph.OfferedRPS),
	}
	if r.served > 0 {
		// A step's requests that succeed late, from the queue the step
		// built, were not served at the step's rate: a 3 s step at 1.15×
		// capacity queues 0.45 s of work, which a 1 s timeout lets
		// finish, and would read as goodput above the capacity.
		s.GoodputRPS = report.Round(min(s.GoodputRPS, r.served))
	}
	s.MeetsSLO = s.ErrorRate <= p.cfg.SLO.ErrorRate && s.P99S <= p.cfg.SLO.P99.Seconds()
	s.Saturated = s.GoodputRPS < 0.9*s.OfferedRPS
	if r.before != nil && r.after != nil {
		if r.attempted > 0 && r.after.Seconds > r.before.Seconds {
			s.CPUPerRequestS = report.RoundSeconds((r.after.Seconds - r.before.Seconds) / float64(r.attempted))
		}
		s.Utilisation = report.Round(r.after.Utilisation)
	}
	p.sum.Steps = append(p.sum.Steps, *s)
	p.steps.Append(r.run)
	if p.cfg.OnStep != nil {
		p.cfg.OnStep(*s)
	}
	if r.stopped {
		return s, ctx.Err()
	}
	return s, nil
}

// livePlan measures against the real service.
type livePlan struct {
	cfg  *PlanConfig
	once *HTTP
}

func (l *livePlan) measure(ctx context.Context, name string, rate float64) (stepResult, error) {
	var r stepResult
	if l.cfg.CPU != nil {
		if c, err := l.cfg.CPU.Read(ctx); err == nil {
			r.before = &c
		}
	}
	res, err := Run(ctx, Config{
		Phases:   []Phase{{Name: name, Rate: rate, Duration: l.cfg.Step}},
		Do:       l.once.Func(),
		Mix:      l.cfg.Mix,
		Limits:   l.cfg.Limits,
		Drain:    l.once.Timeout + 500*time.Millisecond,
		Progress: l.cfg.Progress,
	})
	if err != nil {
		return r, err
	}
	if l.cfg.CPU != nil && r.before != nil {
		if c, err := l.cfg.CPU.Read(ctx); err == nil {
			r.after = &c
		}
	}
	r.run, r.stopped = res.Run(), res.Stopped
	if len(res.Phases) > 0 {
		r.attempted = res.Phases[0].Attempted
	}
	r.served = servedWithin(res, l.cfg.Step)
	return r, nil
}

// servedWithin returns the successes of res that completed in its first d,
// per second of d (0 when res has no series).
func servedWithin(res *Result, d time.Duration) float64 {
	if res.Resolution <= 0 || d <= 0 {
		return 0
	}
	var n int64
	for i, b := range res.Series {
		if time.Duration(i+1)*res.Resolution > d {
			break
		}
		n += b.Served
	}
	return float64(n) / d.Seconds()
}

// settle waits until single requests, a few a second, are answered within
// the SLO three times in a row: the queue a broken step left behind is
// gone. It gives up after cfg.Settle and goes on.
func (l *livePlan) settle(ctx context.Context) error {
	until := time.Now().Add(l.cfg.Settle)
	good := 0
	for good < 3 && time.Now().Before(until) {
		t0 := time.Now()
		pctx, cancel := context.WithTimeout(ctx, l.cfg.SLO.P99)
		ok := l.once.Once()(pctx) == Goodput
		cancel()
		if ok && time.Since(t0) <= l.cfg.SLO.P99 {
			good++
		} else {
			good = 0
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// check runs the metastability schedule with the configured clients.
func (l *livePlan) check(ctx context.Context, normal, over float64) (report.Run, error) {
	t := l.cfg.Target
	t.Client, t.Retries = l.cfg.Retry, 0
	if t.Client == ClientNaive {
		t.Retries = l.cfg.Retries
	}
	h, err := NewHTTP(t)
	if err != nil {
		return report.Run{}, err
	}
	defer h.CloseIdleConnections()
	res, err := Run(ctx, Config{
		Phases: metastabilityPhases(l.cfg.Step, normal, over),
		Do:     h.Func(), Mix: l.cfg.Mix, Limits: l.cfg.Limits,
		Drain:    h.Timeout*time.Duration(h.Retries+1) + time.Second,
		Progress: l.cfg.Progress,
	})
	if err != nil {
		return report.Run{}, err
	}
	if res.Stopped {
		return res.Run(), ctx.Err()
	}
	return res.Run(), nil
}

// metastabilityPhases is the schedule of the metastability check: the
// normal load for two steps (at least 5 s: the pre-trigger goodput), the
// overload for one step, and the normal load again for three steps (at
// least 8 s: recovery_s needs 3 s in a row of it).
func metastabilityPhases(step time.Duration, normal, over float64) []Phase {
	return []Phase{
		{Name: "normal", Rate: normal, Duration: max(2*step, 5*time.Second)},
		{Name: "overload", Rate: over, Duration: step},
		{Name: "after", Rate: normal, Duration: max(3*step, 8*time.Second)},
	}
}

// wait lets the service settle after a step, within the budget.
func (p *planner) wait(ctx context.Context) error {
	if err := p.fits(p.cfg.Settle); err != nil {
		return err
	}
	return p.settle(ctx)
}

func (p *planner) report() *PlanReport {
	s := &p.sum
	for _, st := range s.Steps {
		s.MaxTriedRPS = max(s.MaxTriedRPS, st.OfferedRPS)
		s.PeakGoodputRPS = max(s.PeakGoodputRPS, st.GoodputRPS)
		if st.Saturated && (s.BreakingRPS == 0 || st.OfferedRPS < s.BreakingRPS) {
			s.BreakingRPS = st.OfferedRPS
		}
	}
	var highest *PlanStep
	for i := range s.Steps {
		if st := &s.Steps[i]; st.Stage == "past" && (highest == nil || st.OfferedRPS > highest.OfferedRPS) {
			highest = st
		}
	}
	if highest != nil {
		s.PastRPS = highest.OfferedRPS
		s.PastGoodputRPS = highest.GoodputRPS
		s.PastGoodputShare = report.Share(highest.GoodputRPS, s.PeakGoodputRPS)
	}
	s.CPU = p.cpuCost()
	s.Threshold = Threshold{RPS: s.KneeRPS}
	if s.CPU != nil && s.CPU.UtilisationAtKnee > 0 {
		s.Threshold.CPUTarget = math.Floor(s.CPU.UtilisationAtKnee*100) / 100
	}
	if p.cfg.PeakRPS > 0 && s.KneeRPS > 0 {
		sz := Size(p.cfg.PeakRPS, s.KneeRPS)
		s.Sizing = &sz
	}
	rep := &PlanReport{Report: report.Report{
		Tool:     "load plan",
		Scenario: p.cfg.Target.URL,
		Description: fmt.Sprintf("Open-loop steps of %v from %.0f requests/s (×%.2f), each request sent once, against the SLO p99 ≤ %v and errors ≤ %.1f%%.",
			p.cfg.Step, p.cfg.Start, p.cfg.Growth, p.cfg.SLO.P99, 100*p.cfg.SLO.ErrorRate),
		CapacityRPS: s.KneeRPS,
	}, Plan: *s}
	if len(p.steps.Phases) > 0 {
		steps := p.steps
		steps.Name, steps.Protection, steps.Client, steps.CapacityRPS = "steps", "unknown", ClientNone, s.KneeRPS
		rep.Runs = append(rep.Runs, steps)
		rep.DurationS = steps.Phases[len(steps.Phases)-1].EndS
	}
	if p.meta != nil {
		m := *p.meta
		m.CapacityRPS = s.KneeRPS
		rep.Runs = append(rep.Runs, m)
		rep.Trigger = "overload"
	}
	if rep.Runs == nil {
		rep.Runs = []report.Run{}
	}
	for _, r := range rep.Runs {
		if r.GeneratorErrors > 0 || r.MaxLagS > 0.1 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d generator errors, the generator lagged up to %.0f ms: the service's figures are understated", r.Name, r.GeneratorErrors, 1000*r.MaxLagS))
		}
	}
	return rep
}

// cpuCost turns the CPU readings of the steps that met the SLO into a
// cost per request.
func (p *planner) cpuCost() *CPUCost {
	if p.cfg.CPU == nil {
		return nil
	}
	c := &CPUCost{Source: p.cfg.CPU.Name()}
	var per, xs, ys []float64
	for _, st := range p.sum.Steps {
		if !st.MeetsSLO || st.Saturated {
			continue
		}
		if st.CPUPerRequestS > 0 {
			per = append(per, st.CPUPerRequestS)
		}
		if st.Utilisation > 0 {
			xs, ys = append(xs, st.OfferedRPS), append(ys, st.Utilisation)
		}
	}
	if len(per) > 0 {
		m, _, _ := report.Median(per)
		c.PerRequestS = report.RoundSeconds(m)
	}
	if a, b, ok := report.FitLine(xs, ys); ok {
		c.UtilisationPerRPS = math.Round(b*1e9) / 1e9
		c.UtilisationAtKnee = report.Round(a + b*p.sum.KneeRPS)
	}
	return c
}
