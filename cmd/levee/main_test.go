package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/report"
	"github.com/levee-dev/levee/tools/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	if hijack() {
		return
	}
	os.Exit(m.Run())
}

// levee runs the CLI in-process with args and returns its exit status,
// stdout and stderr.
func levee(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// goType matches what a message would show of a Go type.
var goType = regexp.MustCompile(`\b(sim|main|report|kong)\.[A-Z]|\b(float64|int64|uint64|\[\]string)\b|in type|into `)

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		stderr []string // substrings, in order
	}{
		{"unknown flag", []string{"sim", "--json", "--bogus"}, []string{"levee: unknown flag --bogus", "Usage: levee sim"}},
		{"mistyped flag", []string{"sim", "--jsn"}, []string{`did you mean "--json"?`, "Usage: levee sim"}},
		{"no command", nil, []string{"levee: expected one of", "Usage: levee <command>"}},
		{"mistyped command", []string{"simm"}, []string{`unexpected argument simm, did you mean "sim"?`}},
		{"mistyped scenario", []string{"sim", "--json", "avalance"}, []string{`no scenario "avalance" (did you mean "avalanche"?)`, "Usage: levee sim"}},
		{"unknown scenario", []string{"sim", "nosuch"}, []string{`no scenario "nosuch"; the built-in ones are amplification, avalanche`}},
		{"name and file", []string{"sim", "avalanche", "-f", "x.yaml"}, []string{"not both", "Usage: levee sim"}},
		{"bad seed", []string{"sim", "--seed", "abc", "avalanche"}, []string{`--seed: expected`, "Usage: levee sim"}},
		{"help for nothing", []string{"help", "bogus"}, []string{"unexpected argument bogus", "Usage: levee help"}},
		{"demo repeat", []string{"demo", "--repeat", "0", "--json"}, []string{"--repeat 0 out of [1, 100]", "Usage: levee demo"}},
		{"demo trace unwritable", []string{"demo", "--trace", "/nonexistent-levee-dir/t.jsonl"}, []string{"--trace: open /nonexistent-levee-dir/t.jsonl", "Usage: levee demo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := levee(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			rest := stderr
			for _, want := range tt.stderr {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Fatalf("stderr lacks %q (in order):\n%s", want, stderr)
				}
				rest = rest[i+len(want):]
			}
			if goType.MatchString(stderr) {
				t.Errorf("stderr names a Go type:\n%s", stderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Usage: levee <command>"},
		{[]string{"help", "sim"}, "Usage: levee sim [<name>] [flags]"},
		{[]string{"sim", "--help"}, "Usage: levee sim [<name>] [flags]"},
		{[]string{"--help"}, "Usage: levee <command>"},
	}
	for _, tt := range tests {
		code, stdout, stderr := levee(t, tt.args...)
		if code != exitOK || !strings.Contains(stdout, tt.want) || stderr != "" {
			t.Errorf("levee %v: exit %d, stdout %q…, stderr %q; want 0, %q on stdout, nothing on stderr",
				tt.args, code, stdout[:min(len(stdout), 60)], stderr, tt.want)
		}
	}
}

func TestScenarioFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown field", "name: x\nphases: [{name: a, duration: 1s}]\ncapacity_rsp: 100\n",
			`scenario.yaml:3: unknown field "capacity_rsp" (did you mean "capacity_rps"?)`},
		{"nested unknown field", "name: x\nphases: [{name: a, duration: 1s}]\ntiers:\n  - {name: app, cors: 2, service: {mean: 1ms}}\n",
			`scenario.yaml:4: tiers[0]: unknown field "cors" (did you mean "cores"?)`},
		{"text for a number", "name: x\nphases: [{name: a, duration: 1s}]\nclients: [{rate_rps: lots, target: app}]\n",
			`scenario.yaml:3: clients[0].rate_rps: want a number, got "lots"`},
		{"validation", "name: x\nphases: [{name: a, duration: 1s}]\nclients: [{rate_rps: 1, target: db}]\ntiers: [{name: app, service: {mean: 1ms}}]\n",
			`scenario.yaml:3: clients[0].target: no tier named "db"`},
		{"syntax", "name: [x\n", `scenario.yaml:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "scenario.yaml")
			if err := os.WriteFile(path, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := levee(t, "sim", "--json", "-f", path)
			if code != exitFailure || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitFailure)
			}
			want := "levee: " + strings.Replace(tt.want, "scenario.yaml", path, 1)
			if !strings.HasPrefix(stderr, want) {
				t.Errorf("stderr = %q, want it to start with %q", stderr, want)
			}
			if goType.MatchString(stderr) {
				t.Errorf("stderr names a Go type: %q", stderr)
			}
		})
	}
}

func TestVersionAndList(t *testing.T) {
	if code, stdout, _ := levee(t, "version"); code != 0 || !strings.HasPrefix(stdout, "levee ") {
		t.Errorf("version: exit %d, %q", code, stdout)
	}
	code, stdout, _ := levee(t, "sim", "--list")
	if code != 0 {
		t.Fatalf("sim --list: exit %d", code)
	}
	for _, n := range sim.ScenarioNames() {
		if !strings.Contains(stdout, n) {
			t.Errorf("sim --list lacks %s:\n%s", n, stdout)
		}
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (go test -update rewrites it); got:\n%s", path, got)
	}
}

// strict decodes b into v refusing any field v does not have: the JSON
// holds the one report schema and nothing else.
func strict(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("the JSON is not in the report schema: %v", err)
	}
}

func TestSimJSONGolden(t *testing.T) {
	code, stdout, stderr := levee(t, "sim", "--json", "-q", "--seed", "3", "-f", filepath.Join("testdata", "small.yaml"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden(t, "sim-small.json", []byte(stdout))
	var r sim.Report
	strict(t, []byte(stdout), &r)
	if r.Tool != "sim" || len(r.Runs) != 1 || r.Runs[0].Phases[1].Name != "spike" || r.Runs[0].RecoveryS == nil || *r.Runs[0].RecoveryS != 2 {
		t.Errorf("report: tool %q, %d runs, recovery %v; want sim, 1 run, 2 s", r.Tool, len(r.Runs), r.Runs[0].RecoveryS)
	}
	// The same seed gives the same bytes.
	if _, again, _ := levee(t, "sim", "--json", "-q", "--seed", "3", "-f", filepath.Join("testdata", "small.yaml")); again != stdout {
		t.Error("the same scenario and seed gave different JSON")
	}
}

// TestDemoJSONGolden checks the demo's JSON on fixed runs (the demo
// itself is real-time, behind the realtime build tag): the one schema and
// nothing else.
func TestDemoJSONGolden(t *testing.T) {
	run := func(name, prot string, good float64) demoRun {
		r := report.Run{Name: name, Protection: prot, Client: "naive", CapacityRPS: 500}
		var buckets []report.Tally
		for i, p := range []struct {
			name string
			x    float64
		}{{"normal", normalX}, {"spike", spikeX}, {"after", afterX}} {
			r.Phases = append(r.Phases, report.Phase{Name: p.name, StartS: float64(2 * i), EndS: float64(2*i + 2),
				Rates:   report.Rates{OfferedRPS: 500 * p.x, AttemptedRPS: 500 * p.x, GoodputRPS: min(good, 500*p.x), FailedRPS: 500*p.x - min(good, 500*p.x)},
				Latency: report.Latency{P50: 0.002, P99: 0.5}})
			g := int64(min(good, 500*p.x))
			for range 2 {
				buckets = append(buckets, report.Tally{Offered: int64(500 * p.x), Attempted: int64(500 * p.x), Goodput: g, Failed: int64(500*p.x) - g})
			}
		}
		r.Series = report.SeriesOf(buckets, 1)
		r.RecoveryS = r.RecoveryAfter("spike")
		r.OutageS = report.Outage(r.Series)
		return demoRun{Run: r, server: backend.Report{Protection: prot}}
	}
	runs := []demoRun{run("none-1", backend.None, 20), run("levee-1", backend.Levee, 480)}
	runs[0].GeneratorErrors = 3
	rep := demoReport(500, 2*time.Millisecond, planQuick, runs)
	var b bytes.Buffer
	if err := writeJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	golden(t, "demo.json", b.Bytes())
	var r report.Report
	strict(t, b.Bytes(), &r)
	if r.Tool != "demo" || r.Trigger != "spike" || len(r.Notes) != 1 {
		t.Errorf("demo report: tool %q trigger %q notes %v", r.Tool, r.Trigger, r.Notes)
	}
}

// TestTracePath checks the demo's trace file names: the first levee run
// writes the file asked for, the later ones number theirs before the
// extension.
func TestTracePath(t *testing.T) {
	for _, c := range []struct {
		file string
		i    int
		want string
	}{
		{"", 2, ""},
		{"t.jsonl", 1, "t.jsonl"},
		{"t.jsonl", 3, "t-3.jsonl"},
		{"dir.d/trace", 2, "dir.d/trace-2"},
	} {
		if got := tracePath(c.file, c.i); got != c.want {
			t.Errorf("tracePath(%q, %d) = %q, want %q", c.file, c.i, got, c.want)
		}
	}
}
