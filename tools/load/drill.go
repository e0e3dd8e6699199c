package load

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/tools/report"
)

// DrillConfig configures Drill. The zero value of each optional field
// means its default.
type DrillConfig struct {
	// Target describes the probe requests. Its client model is used as
	// is (ClientNone when empty).
	Target HTTP
	// Admin is the service's admin endpoint; nil drills without forcing
	// (only level 0 and the overload check).
	Admin *Admin
	// Checks are the user's statements about the degraded responses.
	Checks []Check
	// Levels are the degradation levels to force, 0 (nothing forced)
	// included; default 0 … the service's highest level.
	Levels []int
	// ShedLevels are the shed levels to force to check the order of
	// shedding; default 1, 2 and 3 when the service can force them.
	// Negative: none.
	ShedLevels []float64
	// OverloadRPS, if positive, drives load past the threshold at this
	// rate, with all four criticalities alike, and checks that shedding
	// goes lowest criticality first.
	OverloadRPS float64
	// Rate of the probe requests at each level; default 20/s.
	Rate float64
	// Hold is how long each level is probed; default 3s.
	Hold time.Duration
	// MinPass is the share of a level's responses a check must pass;
	// default 1 (every response).
	MinPass float64
	Limits  Limits
	// Progress is passed to every probe run; OnLevel is called after each
	// level.
	Progress func(Progress)
	OnLevel  func(DrillLevel)
}

// DrillLevel is what one level of the drill found.
type DrillLevel struct {
	// Name is "level N", "shed L" or "overload R/s".
	Name  string `json:"name"`
	Level int    `json:"degrade_level"`
	// Forced says the endpoint confirmed the forced level.
	Forced    bool          `json:"forced"`
	Responses int64         `json:"responses"`
	Checks    []CheckResult `json:"checks,omitempty"`
	// Shedding is the order-of-shedding check of a shed or overload level.
	Shedding *Shedding `json:"shedding,omitempty"`
	Passed   bool      `json:"passed"`
}

// CheckResult is one check at one level.
type CheckResult struct {
	Check     string  `json:"check"`
	Responses int64   `json:"responses"`
	Failures  int64   `json:"failures"`
	PassShare float64 `json:"pass_share"`
	Passed    bool    `json:"passed"`
	// Example is what was wrong with one failing response.
	Example string `json:"example,omitempty"`
}

// Shedding is the share of each criticality the service rejected, shed
// first → last, and whether the order held.
type Shedding struct {
	// ForcedLevel is the shed level forced (0 for an overload).
	ForcedLevel float64      `json:"forced_level,omitempty"`
	Rejected    []ClassShare `json:"rejected"`
	OrderHeld   bool         `json:"order_held"`
	Problems    []string     `json:"problems,omitempty"`
}

// ClassShare is the share of one class's requests that something happened
// to.
type ClassShare struct {
	Name  string  `json:"name"`
	Share float64 `json:"share"`
}

// DrillSummary is what a drill found, the "drill" section of its report.
type DrillSummary struct {
	Passed bool         `json:"passed"`
	Levels []DrillLevel `json:"levels"`
	// Failures name the level and the check of every failure, for the
	// command's exit message.
	Failures []string `json:"failures,omitempty"`
	Stopped  bool     `json:"stopped,omitempty"`
}

// DrillReport is a drill in levee's report schema: a run per level and
// the drill's findings.
type DrillReport struct {
	report.Report
	Drill DrillSummary `json:"drill"`
}

// orderSlackMin is the least slack orderSlack allows, and orderZ how
// many standard errors it allows beyond that.
const (
	orderSlackMin = 0.05
	orderZ        = 4
)

// orderSlack is how much more a more important criticality (rejected
// share p2 of n2 requests) may be rejected than the one shed before it
// (p1 of n1) before the order counts as broken: orderZ standard errors
// of the difference of the two shares (pooled), at least orderSlackMin.
// Two classes that a server treats as one differ by chance — levee caps
// an untrusted caller's CRITICAL_PLUS to CRITICAL — and a fixed 5-point
// slack called 55 % against 49 % of about 1,600 requests each (3.4
// standard errors) an inversion; a real one (60 % against 20 %) is
// still one, and a handful of requests cannot show one.
func orderSlack(p1, n1, p2, n2 float64) float64 {
	if n1 <= 0 || n2 <= 0 {
		return 1
	}
	p := (p1*n1 + p2*n2) / (n1 + n2)
	return max(orderSlackMin, orderZ*math.Sqrt(p*(1-p)*(1/n1+1/n2)))
}

func (c *DrillConfig) defaults() error {
	l, err := c.Limits.orDefault()
	if err != nil {
		return err
	}
	c.Limits = l
	if c.Target.Client == "" {
		c.Target.Client = ClientNone
	}
	if c.Rate <= 0 {
		c.Rate = 20
	}
	if c.Hold <= 0 {
		c.Hold = 3 * time.Second
	}
	if c.MinPass <= 0 || c.MinPass > 1 {
		c.MinPass = 1
	}
	if c.Rate > l.MaxRate || c.OverloadRPS > l.MaxRate {
		return fmt.Errorf("%w: drill rate above %.0f requests/s", ErrLimits, l.MaxRate)
	}
	return nil
}

// Drill exercises a levee service's degraded paths: for each level it
// forces the degradation level through the admin endpoint (with an expiry
// of the probe's length plus 10 s, so that the service ends it by itself
// if the drill dies), probes the service at a modest rate, and evaluates
// every check that concerns the level on every response; then it forces
// shed levels and/or drives load past the threshold with all four
// criticalities, and checks that the service sheds the lowest criticality
// first. It ends any drill in force before it returns. The drill passes
// when every check passed at every level and the order of shedding held.
// Cancelling ctx stops it; the report covers the levels that ran.
func Drill(ctx context.Context, cfg DrillConfig) (*DrillReport, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	var st DrillState
	if cfg.Admin != nil {
		var err error
		if st, err = cfg.Admin.State(ctx); err != nil {
			return nil, err
		}
		defer func() {
			ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			_ = cfg.Admin.End(ectx)
		}()
	}
	levels := cfg.Levels
	if levels == nil {
		for l := 0; l <= st.DegradeMax; l++ {
			levels = append(levels, l)
		}
	}
	for _, l := range levels {
		if l < 0 || (l > 0 && (cfg.Admin == nil || l > st.DegradeMax)) {
			return nil, fmt.Errorf("load: degradation level %d cannot be forced (the service's highest is %d%s)", l, st.DegradeMax, map[bool]string{true: ", and no admin endpoint was given"}[cfg.Admin == nil])
		}
	}
	shedLevels := cfg.ShedLevels
	if shedLevels == nil && st.ShedSupported {
		shedLevels = []float64{1, 2, 3}
	}
	if len(shedLevels) > 0 && shedLevels[0] < 0 {
		shedLevels = nil
	}
	if len(shedLevels) > 0 && (cfg.Admin == nil || !st.ShedSupported) {
		return nil, fmt.Errorf("load: the service cannot force a shed level; drill the order of shedding with an overload rate instead")
	}
	d := &driller{cfg: cfg}
	rep := &DrillReport{Report: report.Report{Tool: "load drill", Scenario: cfg.Target.URL,
		Description: fmt.Sprintf("Each level probed at %.0f requests/s for %v; checks must pass on %.0f%% of the responses.", cfg.Rate, cfg.Hold, 100*cfg.MinPass)}}
	err := d.run(ctx, levels, shedLevels)
	rep.Drill = d.sum
	rep.Runs = d.runs
	if rep.Runs == nil {
		rep.Runs = []report.Run{}
	}
	for _, r := range rep.Runs {
		rep.DurationS += r.Phases[len(r.Phases)-1].EndS
	}
	rep.DurationS = report.Round(rep.DurationS)
	if err != nil && ctx.Err() == nil {
		return rep, err
	}
	rep.Drill.Stopped = ctx.Err() != nil
	rep.Drill.Passed = !rep.Drill.Stopped && len(rep.Drill.Failures) == 0
	return rep, nil
}

type driller struct {
	cfg  DrillConfig
	sum  DrillSummary
	runs []report.Run
}

func (d *driller) run(ctx context.Context, levels []int, shedLevels []float64) error {
	for _, l := range levels {
		if err := d.level(ctx, l); err != nil {
			return err
		}
	}
	for _, s := range shedLevels {
		if err := d.shed(ctx, s); err != nil {
			return err
		}
	}
	if d.cfg.OverloadRPS > 0 {
		return d.overload(ctx)
	}
	return nil
}

// level probes degradation level l (forced when l > 0).
func (d *driller) level(ctx context.Context, l int) error {
	lv := DrillLevel{Name: fmt.Sprintf("level %d", l), Level: l}
	if l > 0 {
		st, err := d.cfg.Admin.Force(ctx, &l, nil, d.cfg.Hold+10*time.Second)
		if err != nil {
			return err
		}
		lv.Forced = st.Degrade != nil && int(st.Degrade.Level) == l
		if !lv.Forced {
			d.fail(&lv, "the admin endpoint did not confirm the forced level")
		}
	} else if d.cfg.Admin != nil {
		if err := d.cfg.Admin.End(ctx); err != nil {
			return err
		}
	}
	var checks []*checkCounter
	for i := range d.cfg.Checks {
		if c := &d.cfg.Checks[i]; c.Applies(l) {
			checks = append(checks, &checkCounter{check: c})
		}
	}
	run, responses, err := d.probe(ctx, lv.Name, d.cfg.Rate, Mix{}, checks)
	if err != nil {
		return err
	}
	lv.Responses = responses
	for _, cc := range checks {
		r := cc.result(d.cfg.MinPass)
		lv.Checks = append(lv.Checks, r)
		if !r.Passed {
			d.fail(&lv, fmt.Sprintf("check %q failed on %d of %d responses (%s)", r.Check, r.Failures, r.Responses, r.Example))
		}
	}
	if len(checks) > 0 && responses == 0 {
		d.fail(&lv, "no response arrived to check")
	}
	d.finish(lv, run)
	return ctx.Err()
}

// shed forces shed level s and checks the order of shedding.
func (d *driller) shed(ctx context.Context, s float64) error {
	lv := DrillLevel{Name: fmt.Sprintf("shed %g", s)}
	if err := d.cfg.Admin.End(ctx); err != nil {
		return err
	}
	st, err := d.cfg.Admin.Force(ctx, nil, &s, d.cfg.Hold+10*time.Second)
	if err != nil {
		return err
	}
	lv.Forced = st.Shed != nil && st.Shed.Level == s
	if !lv.Forced {
		d.fail(&lv, "the admin endpoint did not confirm the forced shed level")
	}
	run, responses, err := d.probe(ctx, lv.Name, d.cfg.Rate, allCriticalities(), nil)
	if err != nil {
		return err
	}
	lv.Responses = responses
	lv.Shedding = shedding(run, s)
	for _, p := range lv.Shedding.Problems {
		d.fail(&lv, p)
	}
	d.finish(lv, run)
	return ctx.Err()
}

// overload drives load past the threshold and checks the order of
// shedding.
func (d *driller) overload(ctx context.Context) error {
	lv := DrillLevel{Name: fmt.Sprintf("overload %.0f/s", d.cfg.OverloadRPS)}
	if d.cfg.Admin != nil {
		if err := d.cfg.Admin.End(ctx); err != nil {
			return err
		}
	}
	run, responses, err := d.probe(ctx, lv.Name, d.cfg.OverloadRPS, allCriticalities(), nil)
	if err != nil {
		return err
	}
	lv.Responses = responses
	lv.Shedding = shedding(run, 0)
	for _, p := range lv.Shedding.Problems {
		d.fail(&lv, p)
	}
	d.finish(lv, run)
	return ctx.Err()
}

func allCriticalities() Mix {
	return Mix{Criticalities: []Share{{"SHEDDABLE", 1}, {"SHEDDABLE_PLUS", 1}, {"CRITICAL", 1}, {"CRITICAL_PLUS", 1}}}
}

// shedding checks the rejections of a probe with all four criticalities:
// the share rejected must not grow from one criticality to the next more
// important one (beyond the noise: orderSlack), something must be shed, and at a
// forced shed level s the criticalities wholly below it must be shed
// (≥ 90%) and those wholly above it served (≤ 10% rejected).
func shedding(run report.Run, s float64) *Shedding {
	sh := &Shedding{ForcedLevel: s, OrderHeld: true}
	if len(run.Phases) == 0 {
		sh.Problems = append(sh.Problems, "the probe did not run")
		return sh
	}
	ph := run.Phases[0]
	classes := ph.ByCriticality // shed first → last
	dur := ph.EndS - ph.StartS
	var any bool
	for i, c := range classes {
		share := report.Share(c.RejectedRPS, c.OfferedRPS)
		sh.Rejected = append(sh.Rejected, ClassShare{Name: c.Name, Share: share})
		any = any || share > 0
		if i > 0 && share > sh.Rejected[i-1].Share+orderSlack(sh.Rejected[i-1].Share, classes[i-1].OfferedRPS*dur, share, c.OfferedRPS*dur) {
			sh.OrderHeld = false
			sh.Problems = append(sh.Problems, fmt.Sprintf("shedding out of order: %s rejected %.0f%%, more than %s (%.0f%%)",
				c.Name, 100*share, sh.Rejected[i-1].Name, 100*sh.Rejected[i-1].Share))
		}
		if s > 0 {
			rank := float64(criticalityRank(c.Name))
			switch {
			case rank+1 <= s && share < 0.9:
				sh.Problems = append(sh.Problems, fmt.Sprintf("at shed level %g, %s rejected only %.0f%% (want ≥ 90%%)", s, c.Name, 100*share))
			case rank >= math.Ceil(s) && share > 0.1:
				sh.Problems = append(sh.Problems, fmt.Sprintf("at shed level %g, %s rejected %.0f%% (want ≤ 10%%)", s, c.Name, 100*share))
			}
		}
	}
	if !any {
		sh.Problems = append(sh.Problems, "nothing was shed: the load did not pass the threshold")
	}
	return sh
}

// probe offers rate for cfg.Hold and evaluates checks on every response.
func (d *driller) probe(ctx context.Context, name string, rate float64, mix Mix, checks []*checkCounter) (report.Run, int64, error) {
	t := d.cfg.Target
	var responses atomic.Int64
	t.Inspect = func(_ *Call, resp *http.Response, body []byte) {
		responses.Add(1)
		for _, cc := range checks {
			cc.eval(resp, body)
		}
	}
	h, err := NewHTTP(t)
	if err != nil {
		return report.Run{}, 0, err
	}
	defer h.CloseIdleConnections()
	res, err := Run(ctx, Config{
		Phases: []Phase{{Name: name, Rate: rate, Duration: d.cfg.Hold}},
		Do:     h.Func(), Mix: mix, Limits: d.cfg.Limits,
		Drain:    h.Timeout*time.Duration(h.Retries+1) + 500*time.Millisecond,
		Progress: d.cfg.Progress,
	})
	if err != nil {
		return report.Run{}, 0, err
	}
	run := res.Run()
	run.Name, run.Protection, run.Client = name, "levee", t.Client
	return run, responses.Load(), nil
}

func (d *driller) fail(lv *DrillLevel, msg string) {
	d.sum.Failures = append(d.sum.Failures, lv.Name+": "+msg)
}

func (d *driller) finish(lv DrillLevel, run report.Run) {
	lv.Passed = true
	for _, f := range d.sum.Failures {
		if strings.HasPrefix(f, lv.Name+": ") {
			lv.Passed = false
		}
	}
	d.sum.Levels = append(d.sum.Levels, lv)
	if len(run.Phases) > 0 {
		d.runs = append(d.runs, run)
	}
	if d.cfg.OnLevel != nil {
		d.cfg.OnLevel(lv)
	}
}

// checkCounter counts one check's results over a probe.
type checkCounter struct {
	check           *Check
	total, failures atomic.Int64
	mu              sync.Mutex
	example         string
}

func (cc *checkCounter) eval(resp *http.Response, body []byte) {
	cc.total.Add(1)
	if why := cc.check.Eval(resp.StatusCode, resp.Header, body); why != "" {
		cc.failures.Add(1)
		cc.mu.Lock()
		if cc.example == "" {
			cc.example = why
		}
		cc.mu.Unlock()
	}
}

func (cc *checkCounter) result(minPass float64) CheckResult {
	r := CheckResult{Check: cc.check.Source, Responses: cc.total.Load(), Failures: cc.failures.Load()}
	r.PassShare = report.Share(float64(r.Responses-r.Failures), float64(r.Responses))
	r.Passed = r.Responses > 0 && r.PassShare >= minPass
	cc.mu.Lock()
	r.Example = cc.example
	cc.mu.Unlock()
	if r.Responses == 0 {
		r.Example = "no response"
	}
	return r
}

// criticalityRank is the shedding rank of a criticality name (0 shed
// first); -1 for an unknown name.
func criticalityRank(name string) int {
	c, err := levee.ParseCriticality(name)
	if err != nil {
		return -1
	}
	return c.Rank()
}
