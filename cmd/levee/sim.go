package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/levee-dev/levee/internal/suggest"
	"github.com/levee-dev/levee/tools/sim"
)

type simCmd struct {
	Name     string `arg:"" optional:"" help:"Built-in scenario: avalanche, amplification, throttle, metastable, lose-site, gateway."`
	File     string `short:"f" placeholder:"FILE" help:"Scenario YAML file (custom topology) instead of a built-in one."`
	Seed     uint64 `default:"1" help:"Random seed; the same seed gives byte-identical JSON."`
	JSON     bool   `name:"json" help:"Print the report as JSON (levee's one report schema) instead of tables."`
	HTML     string `name:"html" type:"path" placeholder:"FILE" help:"Also write a self-contained HTML report with SVG charts to FILE."`
	SVG      string `name:"svg" type:"path" placeholder:"FILE" help:"Also write one SVG chart comparing the runs (goodput and attempts over time) to FILE."`
	List     bool   `help:"List the built-in scenarios."`
	Show     bool   `help:"Print the scenario's YAML and exit."`
	Quiet    bool   `short:"q" help:"No progress on stderr."`
	Parallel int    `help:"Runs simulated at once (0 = GOMAXPROCS); the result does not depend on it."`
}

func (c *simCmd) Run(e *env) error {
	if c.List {
		return listScenarios(e.stdout)
	}
	data, name, err := c.scenario()
	if err != nil {
		return err
	}
	if c.Show {
		_, err := e.stdout.Write(data)
		return err
	}
	s, err := sim.ParseFile(name, data)
	if err != nil {
		return err
	}
	start := time.Now()
	opt := sim.Options{Seed: c.Seed, Parallel: c.Parallel}
	if !c.Quiet {
		var mu sync.Mutex
		opt.Progress = func(run string, f float64) {
			if time.Since(start) < time.Second {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			fmt.Fprintf(e.stderr, "sim: %s %s %3.0f%% (%.1fs)\n", s.Name, run, 100*f, time.Since(start).Seconds())
		}
	}
	rep := sim.Run(s, opt)
	if c.JSON {
		if err := writeJSON(e.stdout, rep); err != nil {
			return err
		}
	} else if err := rep.WriteTable(e.stdout); err != nil {
		return err
	}
	if c.HTML != "" {
		if err := writeFile(e, c.Quiet, c.HTML, rep.WriteHTML); err != nil {
			return err
		}
	}
	if c.SVG != "" {
		if err := writeFile(e, c.Quiet, c.SVG, rep.WriteSVG); err != nil {
			return err
		}
	}
	return nil
}

// scenario returns the YAML of the scenario the command names and the
// name its errors go under: the file's, or NAME.yaml for a built-in one.
func (c *simCmd) scenario() ([]byte, string, error) {
	names := sim.ScenarioNames()
	switch {
	case c.File != "" && c.Name != "":
		return nil, "", usagef("sim: give a scenario name or -f FILE, not both")
	case c.File != "":
		b, err := os.ReadFile(c.File)
		if err != nil {
			return nil, "", err
		}
		return b, c.File, nil
	case c.Name != "":
		b, ok := sim.BuiltIn(c.Name)
		if !ok {
			return nil, "", usagef("sim: no scenario %q%s; the built-in ones are %s (or give -f FILE)",
				c.Name, suggest.Hint(c.Name, names), strings.Join(names, ", "))
		}
		return b, c.Name + ".yaml", nil
	}
	return nil, "", usagef("sim: name a scenario (%s) or give -f FILE", strings.Join(names, ", "))
}

func listScenarios(w io.Writer) error {
	for _, n := range sim.ScenarioNames() {
		b, _ := sim.BuiltIn(n)
		s, err := sim.Parse(b)
		if err != nil {
			return fmt.Errorf("built-in scenario %s: %w", n, err)
		}
		desc := s.Description
		if len(desc) > 100 {
			cut := strings.LastIndex(desc[:100], " ")
			desc = desc[:cut] + " …"
		}
		fmt.Fprintf(w, "%-14s %s\n", n, desc)
	}
	return nil
}
