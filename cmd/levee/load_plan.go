package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

type loadPlanCmd struct {
	targetFlags
	SLOP99    time.Duration `name:"slo-p99" default:"200ms" help:"The SLO's bound on the p99 latency of successes."`
	SLOErrors float64       `name:"slo-errors" default:"0.01" help:"The SLO's bound on the share of requests that fail or are rejected."`
	Start     float64       `default:"10" help:"The first step's rate, requests/s."`
	Max       float64       `placeholder:"RATE" help:"The highest rate tried (default --max-rate)."`
	Step      time.Duration `default:"5s" help:"Length of each step."`
	Growth    float64       `default:"1.5" help:"Factor from one ramp step to the next."`
	Retry     string        `default:"naive" help:"Clients of the metastability check: naive, levee, none, or off to skip it."`
	Retries   int           `default:"2" help:"Retries of the naive clients of the metastability check."`
	Peak      float64       `placeholder:"RPS" help:"Peak demand to size the fleet for (N+2, two sites)."`
	PID       int           `name:"cpu-pid" placeholder:"PID" help:"A local process serving the target: read its CPU time for the cost of a request."`
	Cores     float64       `placeholder:"N" help:"Cores the process may use (GOMAXPROCS or its quota), to turn its CPU time into utilisation."`
	Status    string        `placeholder:"URL" help:"The target's levee status JSON (e.g. http://host/levee/status?history=0): read its CPU signal."`
	Budget    time.Duration `default:"10m" help:"Bound on the plan's total time, pauses included (at most --max-duration)."`
}

func (c *loadPlanCmd) Run(e *env) error {
	retry, retries := c.Retry, c.Retries
	if retry == "off" {
		retry = ""
	} else if !slices.Contains(load.Clients, retry) {
		return usagef("--retry %q: want naive, levee, none or off", c.Retry)
	}
	h, mix, limits, err := c.target(load.ClientNone, retries)
	if err != nil {
		return err
	}
	var cpu load.CPUSource
	switch {
	case c.PID > 0 && c.Status != "":
		return usagef("give --cpu-pid or --status, not both")
	case c.PID > 0:
		cpu = &load.ProcessCPU{PID: c.PID, Cores: c.Cores}
	case c.Status != "":
		if err := load.CheckTarget(c.Status, c.AllowHost); err != nil {
			return usagef("--status: %v", err)
		}
		cpu = &load.StatusCPU{URL: c.Status}
	}
	if c.SLOP99 <= 0 || !(c.SLOErrors > 0 && c.SLOErrors < 1) {
		return usagef("the SLO: --slo-p99 %v must be > 0 and --slo-errors %v in (0, 1)", c.SLOP99, c.SLOErrors)
	}
	rep, err := load.Plan(e.ctx, load.PlanConfig{
		Target: h, Mix: mix, Limits: limits,
		SLO:   load.SLO{P99: c.SLOP99, ErrorRate: c.SLOErrors},
		Start: c.Start, Max: c.Max, Step: c.Step, Growth: c.Growth,
		Retry: retry, Retries: retries,
		PeakRPS: c.Peak, CPU: cpu, Budget: min(c.Budget, c.MaxDuration),
		Progress: c.progress(e),
		OnStep: func(s load.PlanStep) {
			if !c.Quiet {
				fmt.Fprintf(e.stderr, "levee load plan: %s step at %.0f/s: goodput %.0f/s, p99 %.1f ms, errors %.1f%%, SLO %s\n",
					s.Stage, s.OfferedRPS, s.GoodputRPS, 1000*s.P99S, 100*s.ErrorRate, map[bool]string{true: "met", false: "broken"}[s.MeetsSLO && !s.Saturated])
			}
		},
	})
	if err != nil {
		return usagef("%v", err)
	}
	err = c.output(e, rep, rep.WriteText, func(w io.Writer) error { return writePlanHTML(w, rep) })
	if err == nil && rep.Plan.Stopped && e.ctx.Err() != nil {
		err = errInterrupted
	}
	return err
}
