package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/levee-dev/levee/internal/suggest"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
	"github.com/levee-dev/levee/tools/report/chart"
)

type loadCmd struct {
	Attack loadAttackCmd `cmd:"" help:"Offer a constant or ramped open-loop load and report what came back."`
	Plan   loadPlanCmd   `cmd:"" help:"Ramp the load to find the capacity at the SLO and the breaking point, check recovery, and plan instances."`
	Drill  loadDrillCmd  `cmd:"" help:"Force each degradation level of a levee service and check its degraded responses."`
}

// targetFlags are the flags of every load command that sends requests.
type targetFlags struct {
	URL         string        `arg:"" help:"The URL to send load to (loopback only, unless --allow-host names its host)."`
	Method      string        `short:"X" default:"GET" help:"Request method."`
	Header      []string      `short:"H" placeholder:"'NAME: VALUE'" help:"A request header; repeat for more."`
	Body        string        `placeholder:"TEXT|@FILE" help:"Request body, or @FILE to read it from FILE."`
	Timeout     time.Duration `default:"1s" help:"Client deadline: per attempt for naive clients, per request otherwise."`
	Criticality string        `placeholder:"MIX" help:"Criticality mix, e.g. CRITICAL=3,SHEDDABLE=1 (default: all CRITICAL)."`
	Tenants     string        `placeholder:"MIX" help:"Tenant mix: N equal tenants (e.g. 20), or NAME=WEIGHT,… (default: none)."`
	AllowHost   []string      `name:"allow-host" placeholder:"HOST" help:"Send load to HOST although it is not on loopback; repeat for more."`
	MaxRate     float64       `name:"max-rate" default:"20000" help:"Hard cap on any rate, requests/s (at most 200000)."`
	MaxDuration time.Duration `name:"max-duration" default:"10m" help:"Hard cap on the load's total time (at most 1h)."`
	JSON        bool          `name:"json" help:"Print the report as JSON (levee's one report schema) instead of text."`
	HTML        string        `name:"html" type:"path" placeholder:"FILE" help:"Also write a self-contained HTML report with charts to FILE."`
	Quiet       bool          `short:"q" help:"No live progress line on stderr."`
}

// target checks the flags and returns the request to send, the mix and
// the hard caps. Every problem is a usage error: nothing has been sent.
func (f *targetFlags) target(client string, retries int) (load.HTTP, load.Mix, load.Limits, error) {
	var h load.HTTP
	var mix load.Mix
	if err := load.CheckTarget(f.URL, f.AllowHost); err != nil {
		return h, mix, load.Limits{}, usagef("%v", strings.TrimPrefix(err.Error(), "load: "))
	}
	if !(f.MaxRate > 0 && f.MaxRate <= load.CeilingRate) {
		return h, mix, load.Limits{}, usagef("--max-rate %v out of (0, %d]", f.MaxRate, load.CeilingRate)
	}
	if f.MaxDuration <= 0 || f.MaxDuration > load.CeilingDuration {
		return h, mix, load.Limits{}, usagef("--max-duration %v out of (0, %v]", f.MaxDuration, load.CeilingDuration)
	}
	if f.Timeout <= 0 || f.Timeout > time.Minute {
		return h, mix, load.Limits{}, usagef("--timeout %v out of (0, 1m]", f.Timeout)
	}
	if !slices.Contains(load.Clients, client) {
		return h, mix, load.Limits{}, usagef("unknown client model %q%s (want %s)", client, suggest.Hint(client, load.Clients), strings.Join(load.Clients, ", "))
	}
	if retries < 0 || retries > 10 {
		return h, mix, load.Limits{}, usagef("--retries %d out of [0, 10]", retries)
	}
	h = load.HTTP{Method: strings.ToUpper(f.Method), URL: f.URL, Header: http.Header{}, Client: client, Retries: retries, Timeout: f.Timeout}
	for _, hd := range f.Header {
		k, v, ok := strings.Cut(hd, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return h, mix, load.Limits{}, usagef("header %q: want 'NAME: VALUE'", hd)
		}
		h.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	if name, ok := strings.CutPrefix(f.Body, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return h, mix, load.Limits{}, usagef("--body: %v", err)
		}
		h.Body = b
	} else if f.Body != "" {
		h.Body = []byte(f.Body)
	}
	var err error
	if mix.Criticalities, err = load.ParseShares(f.Criticality); err != nil {
		return h, mix, load.Limits{}, usagef("--criticality: %v", err)
	}
	if mix.Tenants, err = load.ParseShares(f.Tenants); err != nil {
		return h, mix, load.Limits{}, usagef("--tenants: %v", err)
	}
	if _, err := load.NewHTTP(h); err != nil {
		return h, mix, load.Limits{}, usagef("%v", strings.TrimPrefix(err.Error(), "load: "))
	}
	return h, mix, load.Limits{MaxRate: f.MaxRate, MaxDuration: f.MaxDuration}, nil
}

// progress returns the live progress printer, or nil with --quiet.
func (f *targetFlags) progress(e *env) func(load.Progress) {
	if f.Quiet {
		return nil
	}
	return func(p load.Progress) { fmt.Fprintln(e.stderr, p) }
}

// output writes the report: text or JSON on stdout, and the HTML file.
func (f *targetFlags) output(e *env, v any, text func(io.Writer) error, html func(io.Writer) error) error {
	if f.JSON {
		if err := writeJSON(e.stdout, v); err != nil {
			return err
		}
	} else if err := text(e.stdout); err != nil {
		return err
	}
	if f.HTML != "" {
		return writeFile(e, f.Quiet, f.HTML, html)
	}
	return nil
}

// errInterrupted ends a command the user interrupted, after its partial
// report.
var errInterrupted = fmt.Errorf("interrupted: the report covers what ran")

type loadAttackCmd struct {
	targetFlags
	Rate        float64       `default:"100" help:"Requests per second (the start of a ramp with --to)."`
	To          float64       `placeholder:"RATE" help:"Ramp linearly from --rate to this rate over --duration."`
	Duration    time.Duration `default:"10s" help:"Length of the load."`
	Phase       []string      `placeholder:"NAME=RATE[-TO]:DURATION" help:"A phase of the schedule, e.g. warm=100:10s or ramp=100-1000:30s; repeat for more (replaces --rate, --to, --duration)."`
	Trigger     string        `placeholder:"PHASE" help:"Measure recovery_s after this phase."`
	Client      string        `default:"none" help:"Client model: none (one attempt), naive (immediate retries), levee (levee's client)."`
	Retries     int           `default:"2" help:"Retries of naive clients."`
	MaxInFlight int           `name:"max-in-flight" default:"10000" help:"Requests in flight at most; beyond, an arrival is a generator error."`
}

func (c *loadAttackCmd) Run(e *env) error {
	h, mix, limits, err := c.target(c.Client, c.Retries)
	if err != nil {
		return err
	}
	phases, err := c.phases()
	if err != nil {
		return err
	}
	if c.Trigger != "" && !hasPhase(phases, c.Trigger) {
		return usagef("--trigger %q: no such phase%s", c.Trigger, suggest.Hint(c.Trigger, phaseNames(phases)))
	}
	sender, err := load.NewHTTP(h)
	if err != nil {
		return err
	}
	defer sender.CloseIdleConnections()
	res, err := load.Run(e.ctx, load.Config{
		Phases: phases, Do: sender.Func(), Mix: mix, Limits: limits,
		MaxInFlight: c.MaxInFlight, Drain: h.Timeout*time.Duration(max(1, c.Retries+1)) + time.Second,
		Progress: c.progress(e),
	})
	if err != nil {
		// Run checks the schedule before it sends anything.
		return usagef("%v", strings.TrimPrefix(err.Error(), "load: "))
	}
	run := res.Run()
	run.Name, run.Protection, run.Client = "attack", "unknown", c.Client
	if c.Trigger != "" {
		run.RecoveryS = run.RecoveryAfter(c.Trigger)
	}
	var total time.Duration
	for _, p := range phases {
		total += p.Duration
	}
	rep := &report.Report{
		Tool: "load attack", Scenario: c.URL, Trigger: c.Trigger,
		Description: c.describe(h),
		DurationS:   report.Round(total.Seconds()),
		Runs:        []report.Run{run},
	}
	if run.GeneratorErrors > 0 || run.MaxLagS > 0.1 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d generator errors, the generator lagged up to %.0f ms behind its schedule: the service's figures are understated", run.GeneratorErrors, 1000*run.MaxLagS))
	}
	if res.Stopped {
		rep.Notes = append(rep.Notes, "interrupted: the report covers what ran")
	}
	err = c.output(e, rep, rep.WriteText, func(w io.Writer) error { return chart.WriteReport(w, rep, "") })
	if err == nil && res.Stopped {
		err = errInterrupted
	}
	return err
}

func (c *loadAttackCmd) describe(h load.HTTP) string {
	d := fmt.Sprintf("%s %s, open loop, client %s", h.Method, h.URL, h.Client)
	if h.Client == load.ClientNaive {
		d += fmt.Sprintf(" with %d immediate retries", h.Retries)
	}
	return d + fmt.Sprintf(", timeout %v; latency from the scheduled time.", h.Timeout)
}

// phases returns the schedule: the --phase flags, or one phase from
// --rate, --to and --duration.
func (c *loadAttackCmd) phases() ([]load.Phase, error) {
	if len(c.Phase) == 0 {
		if c.Duration <= 0 {
			return nil, usagef("--duration %v: want > 0", c.Duration)
		}
		return []load.Phase{{Name: "load", Rate: c.Rate, To: c.To, Duration: c.Duration}}, nil
	}
	var out []load.Phase
	for _, s := range c.Phase {
		p, err := parsePhase(s)
		if err != nil {
			return nil, usagef("--phase %q: %v", s, err)
		}
		if hasPhase(out, p.Name) {
			return nil, usagef("--phase %q: a second phase named %q", s, p.Name)
		}
		out = append(out, p)
	}
	return out, nil
}

// parsePhase parses NAME=RATE[-TO]:DURATION.
func parsePhase(s string) (load.Phase, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return load.Phase{}, fmt.Errorf("want NAME=RATE[-TO]:DURATION, e.g. warm=100:10s")
	}
	rates, dur, ok := strings.Cut(rest, ":")
	if !ok {
		return load.Phase{}, fmt.Errorf("no duration: want NAME=RATE[-TO]:DURATION")
	}
	p := load.Phase{Name: strings.TrimSpace(name)}
	from, to, ramp := strings.Cut(rates, "-")
	var err error
	if p.Rate, err = strconv.ParseFloat(strings.TrimSpace(from), 64); err != nil || p.Rate < 0 {
		return p, fmt.Errorf("rate %q: want a number ≥ 0", from)
	}
	if ramp {
		if p.To, err = strconv.ParseFloat(strings.TrimSpace(to), 64); err != nil || !(p.To > 0) {
			return p, fmt.Errorf("rate %q: want a number > 0 to ramp to", to)
		}
	}
	if p.Duration, err = time.ParseDuration(strings.TrimSpace(dur)); err != nil || p.Duration <= 0 {
		return p, fmt.Errorf("duration %q: want e.g. 10s", dur)
	}
	return p, nil
}

func hasPhase(ps []load.Phase, name string) bool {
	return slices.Contains(phaseNames(ps), name)
}

func phaseNames(ps []load.Phase) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}
