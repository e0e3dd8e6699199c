package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/levee-dev/levee/tools/sim"
)

type simCmd struct {
	Name     string `arg:"" optional:"" help:"Built-in scenario: avalanche, amplification, throttle, metastable, lose-site."`
	File     string `short:"f" type:"path" help:"Scenario YAML file (custom topology) instead of a built-in one."`
	Seed     uint64 `default:"1" help:"Random seed; the same seed gives byte-identical JSON."`
	JSON     bool   `name:"json" help:"Print the report as JSON instead of tables."`
	HTML     string `name:"html" type:"path" placeholder:"FILE" help:"Also write a self-contained HTML report with SVG charts to FILE."`
	SVG      string `name:"svg" type:"path" placeholder:"FILE" help:"Also write one SVG chart comparing the runs (goodput and attempts over time) to FILE."`
	List     bool   `help:"List the built-in scenarios."`
	Show     bool   `help:"Print the scenario's YAML and exit."`
	Quiet    bool   `short:"q" help:"No progress on stderr."`
	Parallel int    `help:"Runs simulated at once (0 = GOMAXPROCS); the result does not depend on it."`
}

func (c *simCmd) Run() error {
	if c.List {
		for _, n := range sim.ScenarioNames() {
			b, _ := sim.BuiltIn(n)
			s, err := sim.Parse(b)
			desc := ""
			if err == nil {
				desc = s.Description
				if len(desc) > 100 {
					cut := strings.LastIndex(desc[:100], " ")
					desc = desc[:cut] + " …"
				}
			}
			fmt.Printf("%-14s %s\n", n, desc)
		}
		return nil
	}
	var data []byte
	switch {
	case c.File != "" && c.Name != "":
		return errors.New("sim: give a scenario name or -f FILE, not both")
	case c.File != "":
		b, err := os.ReadFile(c.File)
		if err != nil {
			return err
		}
		data = b
	case c.Name != "":
		b, ok := sim.BuiltIn(c.Name)
		if !ok {
			return fmt.Errorf("sim: no scenario %q (have %s)", c.Name, strings.Join(sim.ScenarioNames(), ", "))
		}
		data = b
	default:
		return fmt.Errorf("sim: name a scenario (%s) or give -f FILE", strings.Join(sim.ScenarioNames(), ", "))
	}
	if c.Show {
		_, err := os.Stdout.Write(data)
		return err
	}
	s, err := sim.Parse(data)
	if err != nil {
		if c.File != "" {
			return fmt.Errorf("%s: %w", c.File, err)
		}
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
			fmt.Fprintf(os.Stderr, "sim: %s %s %3.0f%% (%.1fs)\n", s.Name, run, 100*f, time.Since(start).Seconds())
		}
	}
	rep := sim.Run(s, opt)
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else if err := rep.WriteTable(os.Stdout); err != nil {
		return err
	}
	if c.HTML != "" {
		if err := c.write(c.HTML, rep.WriteHTML); err != nil {
			return err
		}
	}
	if c.SVG != "" {
		if err := c.write(c.SVG, rep.WriteSVG); err != nil {
			return err
		}
	}
	return nil
}

func (c *simCmd) write(name string, f func(io.Writer) error) error {
	out, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := f(out); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	if !c.Quiet {
		fmt.Fprintf(os.Stderr, "sim: wrote %s\n", name)
	}
	return nil
}
