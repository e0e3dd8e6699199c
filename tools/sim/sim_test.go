package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

func load(t testing.TB, name string) *Scenario {
	t.Helper()
	data, ok := BuiltIn(name)
	if !ok {
		t.Fatalf("no scenario %q", name)
	}
	s, err := Parse(data)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	return s
}

// scaled returns s with every rate multiplied by f and every service time
// divided by it: the same utilisations, queues (in requests) and memory
// limits scaled by f, the same time constants. Tests run the scenarios at
// a tenth of their size to stay fast under -race.
func scaled(s *Scenario, f float64) *Scenario {
	c := *s
	c.Clients = append([]Client(nil), s.Clients...)
	for i := range c.Clients {
		c.Clients[i].RateRPS *= f
	}
	c.Tiers = append([]Tier(nil), s.Tiers...)
	for i := range c.Tiers {
		t := &c.Tiers[i]
		t.Service.Mean = Duration(float64(t.Service.Mean) / f)
		if t.MemoryLimit > 0 {
			t.MemoryLimit = max(1, int(math.Round(float64(t.MemoryLimit)*f)))
		}
		if t.Queue > 0 {
			t.Queue = max(1, int(math.Round(float64(t.Queue)*f)))
		}
	}
	c.CapacityRPS *= f
	if c.Levee.QueueDelayTarget == 0 {
		c.Levee.QueueDelayTarget = Duration(float64(5*time.Millisecond) / f) // pressure's default, scaled like service times
	}
	return &c
}

func phase(t *testing.T, r report.Run, name string) report.Phase {
	t.Helper()
	for _, p := range r.Phases {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("run %s has no phase %q", r.Name, name)
	return report.Phase{}
}

func runNamed(t *testing.T, rep *Report, name string) report.Run {
	t.Helper()
	for _, r := range rep.Runs {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no run %q", name)
	return report.Run{}
}

// light reports whether to run the small versions of the scenario tests:
// under -short and under the race detector (which slows the simulator
// about thirtyfold). The full versions run in a plain go test.
func light() bool { return testing.Short() || raceEnabled }

func seeds() []uint64 {
	if light() {
		return []uint64{1}
	}
	return []uint64{1, 2, 3, 4, 5}
}

// size picks the scale of a scenario test: full in a plain go test, small
// under -short and -race.
func size(full, small float64) float64 {
	if light() {
		return small
	}
	return full
}

// The seed's avalanche: unprotected, the active instance crashes (in-flight
// over its memory limit), its load moves to the standby, which crashes
// too: outage. With levee: goodput near capacity, no crash. Over several
// seeds and ±25% of the memory limit and the timeout.
func TestAvalanche(t *testing.T) {
	base := scaled(load(t, "avalanche"), size(0.1, 0.03))
	if light() {
		base.Phases[1].Duration = Duration(30 * time.Second)
	}
	type variant struct {
		name     string
		mem, tmo float64
		seed     uint64
	}
	var vs []variant
	for _, sd := range seeds() {
		vs = append(vs, variant{fmt.Sprintf("seed=%d", sd), 1, 1, sd})
	}
	for _, f := range []float64{0.75, 1.25} {
		if light() {
			if f < 1 { // one combined sweep: less memory, longer timeouts
				vs = append(vs, variant{"memory×0.75,timeout×1.25", f, 1 / f, 7})
			}
			continue
		}
		vs = append(vs, variant{fmt.Sprintf("memory×%.2f", f), f, 1, 7})
		vs = append(vs, variant{fmt.Sprintf("timeout×%.2f", f), 1, f, 7})
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			s := *base
			s.Runs = append([]RunSpec(nil), base.Runs...)
			for i := range s.Runs {
				s.Runs[i].MemoryLimitScale = v.mem
				s.Runs[i].TimeoutScale = v.tmo
			}
			rep := Run(&s, Options{Seed: v.seed, Parallel: 1})
			un, lv := runNamed(t, rep, "unprotected"), runNamed(t, rep, "levee")
			capacity := un.CapacityRPS

			// Unprotected: ~10% of demand fails before the first crash,
			// the active crashes first, then the standby, then outage.
			if un.Crashes < 2 {
				t.Fatalf("unprotected: %d crashes, want ≥ 2 (active then standby)", un.Crashes)
			}
			c0, c1 := un.CrashEvents[0], un.CrashEvents[1]
			if c0.Instance != "backend-0" || c1.Instance != "backend-1" || c0.Kind != "memory" || c1.Kind != "memory" {
				t.Errorf("unprotected: first crashes %+v, %+v; want backend-0 then backend-1, both over the memory limit", c0, c1)
			}
			if !strings.Contains(c0.Cause, "over memory limit") {
				t.Errorf("crash cause %q does not say why", c0.Cause)
			}
			if un.OutageS < 10 {
				t.Errorf("unprotected: outage %.0fs, want ≥ 10s", un.OutageS)
			}
			if a := float64(c0.ArrivalsRPS); a < 1.2*capacity {
				t.Errorf("unprotected: %.0f attempts/s reached the active instance in the second before it crashed, want ≥ 1.2 × capacity %.0f (retries amplify)", a, capacity)
			}
			if un.WastedWorkShare <= 0 {
				t.Errorf("unprotected: wasted work share %v, want > 0", un.WastedWorkShare)
			}

			// levee: no crash, goodput near capacity through the peak,
			// the excess rejected explicitly, no outage.
			if lv.Crashes != 0 {
				t.Fatalf("levee: %d crashes, want 0: %+v", lv.Crashes, lv.CrashEvents)
			}
			p := phase(t, lv, "peak")
			if p.GoodputRPS < 0.8*capacity || p.GoodputRPS > capacity {
				t.Errorf("levee: peak goodput %.0f/s, want within [0.8, 1] × capacity %.0f", p.GoodputRPS, capacity)
			}
			if p.RejectedRPS < 0.5*(p.OfferedRPS-capacity) {
				t.Errorf("levee: rejected %.0f/s of %.0f offered, want the excess rejected explicitly", p.RejectedRPS, p.OfferedRPS)
			}
			if lv.OutageS != 0 {
				t.Errorf("levee: outage %.0fs, want 0", lv.OutageS)
			}
			if lv.WastedWorkShare > 0.05 {
				t.Errorf("levee: wasted work share %.3f, want ≤ 0.05", lv.WastedWorkShare)
			}
			if up := phase(t, un, "peak"); p.GoodputRPS < 2*up.GoodputRPS {
				t.Errorf("levee peak goodput %.0f not ≥ 2 × unprotected %.0f", p.GoodputRPS, up.GoodputRPS)
			}
		})
	}
}

// The levee run of the avalanche at full size (10000 QPS instances), over
// five seeds: the scaled-down runs above keep the test fast, this one
// checks the real numbers. Skipped under -short and -race.
func TestAvalancheFullSize(t *testing.T) {
	if light() {
		t.Skip("full size: plain go test only")
	}
	s := load(t, "avalanche")
	var runs []RunSpec
	for _, r := range s.Runs {
		if r.Protection == "levee" {
			runs = append(runs, r)
		}
	}
	s.Runs = runs
	for _, sd := range []uint64{1, 2, 3, 4, 5} {
		t.Run(fmt.Sprintf("seed=%d", sd), func(t *testing.T) {
			t.Parallel()
			lv := Run(s, Options{Seed: sd, Parallel: 1}).Runs[0]
			p := phase(t, lv, "peak")
			if lv.Crashes != 0 {
				t.Errorf("levee: %d crashes, want 0", lv.Crashes)
			}
			if p.GoodputRPS < 0.85*lv.CapacityRPS {
				t.Errorf("levee: peak goodput %.0f/s, want ≥ 0.85 × capacity %.0f", p.GoodputRPS, lv.CapacityRPS)
			}
			worst, at := math.Inf(1), 0
			for b, g := range lv.Series.GoodputRPS {
				if lv.Series.OfferedRPS[b] > 0 && g/lv.Series.OfferedRPS[b] < worst {
					worst, at = g/lv.Series.OfferedRPS[b], b
				}
			}
			if worst < 0.5 {
				t.Errorf("levee: in second %d goodput was %.0f%% of offered (%.0f of %.0f/s), want ≥ 50%% every second",
					at, 100*worst, lv.Series.GoodputRPS[at], lv.Series.OfferedRPS[at])
			}
		})
	}
}

// Amplification at full downstream failure, throttling off: 3^layers
// unprotected, ≈ 1.1 with levee.
func TestAmplification(t *testing.T) {
	s := load(t, "amplification")
	s.Clients[0].RateRPS = 100
	if light() {
		s.Phases[1].Duration = Duration(6 * time.Second)
	}
	rep := Run(s, Options{Seed: 1})
	if len(rep.AmplificationTable) != 8 {
		t.Fatalf("amplification table has %d rows, want 8", len(rep.AmplificationTable))
	}
	for _, row := range rep.AmplificationTable {
		switch row.Protection {
		case "none":
			want := math.Pow(3, float64(row.Layers))
			if math.Abs(row.Amplification-want) > 0.03*want {
				t.Errorf("layers=%d none: amplification %.2f, want %.0f ± 3%%", row.Layers, row.Amplification, want)
			}
		case "levee":
			if row.Amplification < 1 || row.Amplification > 1.25 {
				t.Errorf("layers=%d levee: amplification %.2f, want in [1, 1.25]", row.Layers, row.Amplification)
			}
		}
	}
}

// The K sweep at 10× overload: the backend processes ≈ 1/K of what reaches
// it, and both fractions equal the throttle package's own numbers.
func TestThrottleK(t *testing.T) {
	s := load(t, "throttle")
	s.Tiers[0].Queue = 20 // a shorter queue refuses more of a Poisson stream
	rep := Run(s, Options{Seed: 1})
	if len(rep.KTable) != 4 {
		t.Fatalf("k table has %d rows, want 4", len(rep.KTable))
	}
	for _, k := range rep.KTable {
		if got, want := k.BackendProcessedFraction, 1/k.K; math.Abs(got-want) > 0.03 {
			t.Errorf("K=%.1f: backend processed %.3f, want 1/K = %.3f ± 0.03", k.K, got, want)
		}
		if got, want := k.BackendProcessedFraction, k.ExpectedBackendProcessedFraction; math.Abs(got-want) > 0.03 {
			t.Errorf("K=%.1f: backend processed %.3f, throttle package says %.3f", k.K, got, want)
		}
		if got, want := k.LocalRejectFraction, k.ExpectedLocalRejectFraction; math.Abs(got-want) > 0.03 {
			t.Errorf("K=%.1f: local rejections %.3f, throttle package says %.3f", k.K, got, want)
		}
		if k.Overload < 8 || k.Overload > 12 {
			t.Errorf("K=%.1f: overload %.1f×, want ≈ 10×", k.K, k.Overload)
		}
	}
}

// A short capacity drop: unprotected stays collapsed after the trigger is
// gone; levee recovers within seconds.
func TestMetastable(t *testing.T) {
	base := scaled(load(t, "metastable"), size(1, 0.3))
	for _, sd := range seeds() {
		t.Run(fmt.Sprintf("seed=%d", sd), func(t *testing.T) {
			t.Parallel()
			rep := Run(base, Options{Seed: sd, Parallel: 1})
			un, lv := runNamed(t, rep, "unprotected"), runNamed(t, rep, "levee")
			if un.RecoveryS != nil {
				t.Errorf("unprotected recovered after %.1fs, want never (metastable)", *un.RecoveryS)
			}
			if a := phase(t, un, "after"); a.GoodputRPS > 0.5*a.OfferedRPS {
				t.Errorf("unprotected after the trigger: goodput %.0f of %.0f offered, want collapsed", a.GoodputRPS, a.OfferedRPS)
			}
			if lv.RecoveryS == nil || *lv.RecoveryS > 10 {
				t.Errorf("levee recovery %v, want ≤ 10s", lv.RecoveryS)
			}
			if a := phase(t, lv, "after"); a.GoodputRPS < 0.95*a.OfferedRPS {
				t.Errorf("levee after the trigger: goodput %.0f of %.0f offered, want ≥ 95%%", a.GoodputRPS, a.OfferedRPS)
			}
		})
	}
}

// Losing a site at peak: unprotected, the survivors collapse; levee serves
// what they can; sites planned for 2× lose nothing.
func TestLoseSite(t *testing.T) {
	s := scaled(load(t, "lose-site"), size(0.2, 0.06))
	if light() {
		s.Phases[1].Duration = Duration(20 * time.Second)
	}
	rep := Run(s, Options{Seed: 1})
	un, lv, pl := runNamed(t, rep, "unprotected"), runNamed(t, rep, "levee"), runNamed(t, rep, "planned-2x")
	survivors := un.CapacityRPS / 2
	if un.Crashes == 0 || un.OutageS < 10 {
		t.Errorf("unprotected: %d crashes, %.0fs outage; want crashes and ≥ 10s outage", un.Crashes, un.OutageS)
	}
	if lv.Crashes != 0 {
		t.Errorf("levee: %d crashes, want 0", lv.Crashes)
	}
	// levee's goodput after the loss, over three seeds: a single shortened
	// run (light) varies by ±0.05 of the survivors' capacity from seed to
	// seed.
	good := phase(t, lv, "site-lost").GoodputRPS
	for seed := uint64(2); seed <= 3; seed++ {
		good += phase(t, runNamed(t, Run(s, Options{Seed: seed}), "levee"), "site-lost").GoodputRPS
	}
	if good /= 3; good < 0.7*survivors {
		t.Errorf("levee: goodput %.0f after the loss (mean of 3 seeds), want ≥ 0.7 × the survivors' %.0f", good, survivors)
	}
	if p := phase(t, pl, "site-lost"); p.GoodputRPS < 0.98*p.OfferedRPS || pl.Crashes != 0 {
		t.Errorf("planned-2x: goodput %.0f of %.0f, %d crashes; want everything served", p.GoodputRPS, p.OfferedRPS, pl.Crashes)
	}
}

// The same seed gives byte-identical JSON, whatever the parallelism and
// the host's GOMAXPROCS (a simulated instance's admission counts its own
// cores: admit.WithCores); a different seed gives a different run.
func TestDeterminism(t *testing.T) {
	s := scaled(load(t, "avalanche"), 0.05)
	if light() {
		s = scaled(load(t, "metastable"), 0.3)
		s.Phases[2].Duration = Duration(15 * time.Second)
	}
	enc := func(seed uint64, par int) []byte {
		b, err := json.Marshal(Run(s, Options{Seed: seed, Parallel: par}))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := enc(3, 1), enc(3, 2), enc(4, 2)
	if !bytes.Equal(a, b) {
		t.Errorf("seed 3 gave different JSON on two runs (%d vs %d bytes)", len(a), len(b))
	}
	if bytes.Equal(a, c) {
		t.Errorf("seeds 3 and 4 gave identical JSON")
	}
	// One core at 5× of 20 ms requests: its queue runs past 16 requests
	// (the unread count at which admit takes one core to be behind) and
	// stays under 16 × 7.
	s = sweepScenario(t, sweepShape{1, 20 * time.Millisecond, "exp", 0, 0}, 5, true, time.Second, 4*time.Second)
	a = enc(3, 1)
	for _, procs := range []int{1, 7} {
		prev := runtime.GOMAXPROCS(procs)
		d := enc(3, 1)
		runtime.GOMAXPROCS(prev)
		if !bytes.Equal(a, d) {
			t.Errorf("seed 3 gave different JSON with GOMAXPROCS %d (%d vs %d bytes)", procs, len(a), len(d))
		}
	}
}

func TestBuiltinsParse(t *testing.T) {
	names := ScenarioNames()
	want := []string{"amplification", "avalanche", "gateway", "lose-site", "metastable", "throttle"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("scenarios %v, want %v", names, want)
	}
	for _, n := range names {
		load(t, n)
	}
}

// Validation errors name the line of the offending field.
func TestParseErrors(t *testing.T) {
	const good = `name: x
phases:
  - {name: a, duration: 1s}
clients:
  - name: c
    rate_rps: 10
    target: app
tiers:
  - name: app
    service: {mean: 1ms}
`
	tests := []struct {
		name string
		yaml string
		line int
		msg  string
	}{
		{"unknown field", strings.Replace(good, "    rate_rps: 10\n", "    rate_rps: 10\n    rat: 3\n", 1), 7, `clients[0]: unknown field "rat" (did you mean "rate_rps"?)`},
		{"unknown top-level field", good + "capacity_rsp: 100\n", 11, `unknown field "capacity_rsp" (did you mean "capacity_rps"?)`},
		{"unknown field, nothing close", good + "colour: red\n", 11, `unknown field "colour"`},
		{"text for a number", strings.Replace(good, "rate_rps: 10", "rate_rps: ten", 1), 6, `clients[0].rate_rps: want a number, got "ten"`},
		{"fraction for a whole number", strings.Replace(good, "    service: {mean: 1ms}\n", "    service: {mean: 1ms}\n    cores: 1.5\n", 1), 11, `tiers[0].cores: want a whole number, got "1.5"`},
		{"list for a section", strings.Replace(good, "    service: {mean: 1ms}", "    service: [1ms]", 1), 10, `tiers[0].service: want a section of key: value lines, got a list`},
		{"section for a list", strings.Replace(good, "phases:\n  - {name: a, duration: 1s}", "phases: {name: a}", 1), 2, `phases: want a list, got a section`},
		{"text for a bool", good + "runs:\n  - {name: r, throttle: maybe}\n", 12, `runs[0].throttle: want true or false, got "maybe"`},
		{"bad duration in a field", strings.Replace(good, "{mean: 1ms}", "{mean: fast}", 1), 10, `tiers[0].service.mean: bad duration "fast"`},
		{"bad target", strings.Replace(good, "target: app", "target: nope", 1), 7, `no tier named "nope"`},
		{"bad duration", strings.Replace(good, "duration: 1s", "duration: 1 fortnight", 1), 3, "bad duration"},
		{"negative rate", strings.Replace(good, "rate_rps: 10", "rate_rps: -1", 1), 6, "rate_rps"},
		{"bad policy", good + "    lb: {policy: random}\n", 11, "unknown policy"},
		{"bad dist", strings.Replace(good, "{mean: 1ms}", "{dist: zipf, mean: 1ms}", 1), 10, "unknown distribution"},
		{"missing mean", strings.Replace(good, "{mean: 1ms}", "{dist: exp}", 1), 10, "positive mean"},
		{"bad criticality", strings.Replace(good, "    target: app\n", "    target: app\n    criticality: {URGENT: 1}\n", 1), 8, "unknown criticality"},
		{"bad event tier", good + "events:\n  - {at: 1s, kind: crash, tier: db}\n", 12, `no tier named "db"`},
		{"bad protection", good + "runs:\n  - {name: r, protection: magic}\n", 12, "unknown protection"},
		{"downstream loop", strings.Replace(good, "    service: {mean: 1ms}\n", "    service: {mean: 1ms}\n    downstream: {target: app}\n", 1), 11, "loop"},
		{"syntax", "name: [", 1, "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s", tt.yaml)
			}
			if want := "line " + strconv.Itoa(tt.line); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %s", err, want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if goType.MatchString(err.Error()) {
				t.Errorf("error %q names a Go type", err)
			}
		})
	}
	_, err := ParseFile("scenario.yaml", []byte(good+"capacity_rsp: 100\n"))
	if want := `scenario.yaml:11: unknown field "capacity_rsp" (did you mean "capacity_rps"?)`; err == nil || err.Error() != want {
		t.Errorf("ParseFile error = %v, want %s", err, want)
	}
	if _, err := Parse([]byte(good)); err != nil {
		t.Fatalf("good scenario: %v", err)
	}
}

// goType matches what a message would show of a Go type: a package-
// qualified name, or the words Go's decoders use for one.
var goType = regexp.MustCompile(`\bsim\.[A-Z]|\b(float64|int64|uint64|int|bool|string)\b|map\[|\[\][a-z]|!!|in type|into `)

func FuzzParse(f *testing.F) {
	for _, n := range ScenarioNames() {
		b, _ := BuiltIn(n)
		f.Add(b)
	}
	f.Add([]byte("name: x\nphases: [{name: a, duration: 1s}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sim: ") {
				t.Errorf("error without package prefix: %v", err)
			}
			if _, ok := err.(*ParseError); !ok {
				t.Errorf("error %T, want *ParseError: %v", err, err)
			}
			return
		}
		if s.Name == "" || len(s.Phases) == 0 || len(s.Runs) == 0 {
			t.Errorf("accepted an incomplete scenario: %+v", s)
		}
	})
}

// The simulator holds no protection logic: its imports must include the
// real policies and no other decision-making code.
func TestNoPolicyCode(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{
		"github.com/levee-dev/levee":                    true,
		"github.com/levee-dev/levee/admit":              true,
		"github.com/levee-dev/levee/retry":              true,
		"github.com/levee-dev/levee/throttle":           true,
		"github.com/levee-dev/levee/pressure":           true,
		"github.com/levee-dev/levee/overload":           true,
		"github.com/levee-dev/levee/fleet":              true,
		"github.com/levee-dev/levee/tools/report":       true,
		"github.com/levee-dev/levee/tools/report/chart": true,
		"github.com/levee-dev/levee/internal/suggest":   true,
		"go.yaml.in/yaml/v3":                            true,
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	for _, fn := range files {
		if strings.HasSuffix(fn, "_test.go") {
			continue
		}
		src, err := os.ReadFile(fn)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, fn, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			used[p] = true
			if strings.Contains(p, ".") && !allowed[p] {
				t.Errorf("%s imports %s: the simulator may use only levee's own policies", fn, p)
			}
		}
	}
	for _, p := range []string{"github.com/levee-dev/levee/admit", "github.com/levee-dev/levee/retry", "github.com/levee-dev/levee/throttle"} {
		if !used[p] {
			t.Errorf("the simulator does not use %s", p)
		}
	}
}
