// Command levee is levee's command-line tool: a live demonstration of an
// overload on loopback (demo), the avalanche simulator (sim) and version
// information.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/alecthomas/kong"
)

type cli struct {
	Demo    demoCmd    `cmd:"" help:"Overload a real HTTP service on loopback, unprotected and with levee, and compare."`
	Sim     simCmd     `cmd:"" help:"Simulate an avalanche and its cure on virtual time with levee's real policies."`
	Version versionCmd `cmd:"" help:"Print levee's version."`
}

type versionCmd struct{}

func (versionCmd) Run() error {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Println("levee", v)
	return nil
}

func main() {
	if hijack() {
		return
	}
	var c cli
	ctx := kong.Parse(&c,
		kong.Name("levee"),
		kong.Description("levee keeps services serving when demand exceeds capacity."),
		kong.UsageOnError(),
	)
	if err := ctx.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "levee:", err)
		os.Exit(1)
	}
}
