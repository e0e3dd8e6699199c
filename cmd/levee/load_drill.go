package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

type loadDrillCmd struct {
	targetFlags
	Admin     string        `placeholder:"URL" help:"The service's admin endpoint, e.g. http://127.0.0.1:8080/levee/admin (without it only the undegraded level and --overload run)."`
	TokenEnv  string        `name:"token-env" default:"LEVEE_ADMIN_TOKEN" placeholder:"VAR" help:"Environment variable holding the admin token (a token never goes on the command line)."`
	TokenFile string        `name:"token-file" placeholder:"FILE" help:"File holding the admin token, instead of --token-env."`
	Check     []string      `placeholder:"'LEVELS: CONDITION'" help:"A check of the responses, e.g. '>=1: header:X-Degraded', '2: json:degraded=true', '*: status=200'; repeat for more."`
	Level     []int         `placeholder:"N" help:"A degradation level to drill (0 = none forced); repeat for more (default: 0 to the service's highest)."`
	Shed      []float64     `placeholder:"LEVEL" help:"A shed level to force to check the order of shedding; repeat for more (default 1, 2, 3 when the service can; -1 for none)."`
	Overload  float64       `placeholder:"RPS" help:"Also drive load past the threshold at RPS with all four criticalities and check the order of shedding."`
	Rate      float64       `default:"20" help:"Rate of the probe at each level, requests/s."`
	Hold      time.Duration `default:"3s" help:"How long each level is probed."`
	MinPass   float64       `name:"min-pass" default:"1" help:"Share of a level's responses every check must pass."`
	Client    string        `default:"none" help:"Client model of the probe: none, naive or levee."`
	Retries   int           `default:"2" help:"Retries of naive clients."`
}

func (c *loadDrillCmd) Run(e *env) error {
	h, mix, limits, err := c.target(c.Client, c.Retries)
	if err != nil {
		return err
	}
	if len(mix.Criticalities)+len(mix.Tenants) > 0 {
		return usagef("load drill: --criticality and --tenants do not apply (the order of shedding is probed with all four criticalities)")
	}
	var checks []load.Check
	for _, s := range c.Check {
		ck, err := load.ParseCheck(s)
		if err != nil {
			return usagef("--check: %v", err)
		}
		checks = append(checks, ck)
	}
	if !(c.MinPass > 0 && c.MinPass <= 1) {
		return usagef("--min-pass %v out of (0, 1]", c.MinPass)
	}
	cfg := load.DrillConfig{
		Target: h, Checks: checks, Levels: c.Level, ShedLevels: c.Shed, OverloadRPS: c.Overload,
		Rate: c.Rate, Hold: c.Hold, MinPass: c.MinPass, Limits: limits, Progress: c.progress(e),
		OnLevel: func(l load.DrillLevel) {
			if !c.Quiet {
				fmt.Fprintf(e.stderr, "levee load drill: %s: %s\n", l.Name, map[bool]string{true: "ok", false: "FAILED"}[l.Passed])
			}
		},
	}
	if c.Admin != "" {
		if err := load.CheckTarget(c.Admin, c.AllowHost); err != nil {
			return usagef("--admin: %v", strings.TrimPrefix(err.Error(), "load: "))
		}
		token, err := c.token()
		if err != nil {
			return err
		}
		cfg.Admin = &load.Admin{URL: c.Admin, Token: token}
	} else if len(c.Level) > 0 || len(c.Shed) > 0 {
		return usagef("--level and --shed force levels through the admin endpoint: give --admin URL")
	}
	rep, err := load.Drill(e.ctx, cfg)
	if err != nil {
		var ae *load.AdminError
		if errors.As(err, &ae) || errors.Is(err, load.ErrLimits) {
			return err
		}
		if rep == nil {
			return usagef("%v", strings.TrimPrefix(err.Error(), "load: "))
		}
		return err
	}
	if err := c.output(e, rep, rep.WriteText, func(w io.Writer) error { return writeDrillHTML(w, rep) }); err != nil {
		return err
	}
	switch {
	case rep.Drill.Stopped:
		return errInterrupted
	case !rep.Drill.Passed:
		return fmt.Errorf("load drill failed: %s", strings.Join(rep.Drill.Failures, "; "))
	}
	return nil
}

// token reads the admin token from --token-file or the environment.
func (c *loadDrillCmd) token() (string, error) {
	if c.TokenFile != "" {
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return "", usagef("--token-file: %v", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return os.Getenv(c.TokenEnv), nil
}
