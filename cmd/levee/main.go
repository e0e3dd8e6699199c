// Command levee is levee's command-line tool: a live demonstration of an
// overload on loopback (demo), the avalanche simulator (sim), the load
// tester (load attack, load plan, load drill) and version information.
//
// Conventions: results go to stdout (tables, or the one report schema
// with --json), progress and errors to stderr. Exit status 0 is success,
// 1 a failure of the work itself (a broken scenario file, a failed drill,
// an interrupted run, whose partial report is still printed), 2 a usage
// error: then the usage goes to stderr and nothing to stdout.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), levee is a command, at the top, in the
// CLI module (github.com/levee-dev/levee/cmd): it imports the tools (sim,
// load, loopback, backend, report, report/chart), the adapters (leveehttp,
// leveeprom, config, proxy, proxy/proxyprom) and the policies they configure,
// with github.com/alecthomas/kong for its flags and
// github.com/prometheus/client_golang for the proxy's /metrics; nothing
// imports it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/alecthomas/kong"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

type cli struct {
	Demo    demoCmd    `cmd:"" help:"Overload a real HTTP service on loopback, unprotected and with levee, and compare."`
	Sim     simCmd     `cmd:"" help:"Simulate an avalanche and its cure on virtual time with levee's real policies."`
	Load    loadCmd    `cmd:"" help:"Send open-loop load to a service: attack, plan its capacity, drill its degradation."`
	Proxy   proxyCmd   `cmd:"" help:"Run levee's load-balancing reverse proxy in front of services in any language."`
	Help    helpCmd    `cmd:"" help:"Show help for levee or one of its commands."`
	Version versionCmd `cmd:"" help:"Print levee's version."`
}

// env is what a command runs with: where its results and its progress
// go, and the context that ends when the user interrupts (Ctrl-C).
// Commands never write to os.Stdout or os.Stderr directly, so that tests
// run them in-process.
type env struct {
	ctx            context.Context
	stdout, stderr io.Writer
}

// usageError is a command line that names something that does not exist
// or combines options that do not go together: it exits with exitUsage
// and the command's usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

type versionCmd struct{}

func (versionCmd) Run(e *env) error {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintln(e.stdout, "levee", v)
	return nil
}

type helpCmd struct {
	Command []string `arg:"" optional:"" help:"The command to explain, e.g. sim or load plan."`
}

// Run prints the help of the named command (or of levee) on stdout.
func (h helpCmd) Run(ctx *kong.Context) error {
	_, err := ctx.Kong.Parse(append(append([]string(nil), h.Command...), "--help"))
	var pe *kong.ParseError
	if errors.As(err, &pe) {
		return &usageError{err.Error()}
	}
	return err
}

// exitPanic carries kong's exit status out of a parse (it calls Exit on
// --help) to run, which recovers it.
type exitPanic struct{ code int }

func main() {
	if hijack() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runCtx(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs levee with args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runCtx(context.Background(), args, stdout, stderr)
}

// runCtx is run with a context that interrupts the command.
func runCtx(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			ep, ok := r.(exitPanic)
			if !ok {
				panic(r)
			}
			code = ep.code
		}
	}()
	var c cli
	e := &env{ctx: ctx, stdout: stdout, stderr: stderr}
	parser, err := kong.New(&c,
		kong.Name("levee"),
		kong.Description("levee keeps services serving when demand exceeds capacity."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(code int) { panic(exitPanic{code}) }),
		kong.Bind(e),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
	)
	if err != nil {
		fmt.Fprintln(stderr, "levee:", err)
		return exitFailure
	}
	kctx, err := parser.Parse(args)
	if err != nil {
		var pe *kong.ParseError
		if errors.As(err, &pe) {
			return usage(parser, pe.Context, stderr, err)
		}
		fmt.Fprintln(stderr, "levee:", err)
		return exitFailure
	}
	if err := kctx.Run(); err != nil {
		var ue *usageError
		if errors.As(err, &ue) {
			return usage(parser, kctx, stderr, err)
		}
		fmt.Fprintln(stderr, "levee:", err)
		return exitFailure
	}
	return exitOK
}

// usage reports a usage error: the message, then the usage of the command
// it concerns, on stderr.
func usage(parser *kong.Kong, ctx *kong.Context, stderr io.Writer, err error) int {
	fmt.Fprintf(stderr, "levee: %v\n\n", err)
	if ctx != nil {
		parser.Stdout = stderr
		_ = ctx.PrintUsage(true)
	}
	return exitUsage
}

// writeJSON writes v as indented JSON, the form of every --json output.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeFile writes a file with f (an HTML report, a chart) and, unless
// quiet, says so on stderr.
func writeFile(e *env, quiet bool, name string, f func(io.Writer) error) error {
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
	if !quiet {
		fmt.Fprintf(e.stderr, "levee: wrote %s\n", name)
	}
	return nil
}
