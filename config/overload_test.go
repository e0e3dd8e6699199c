package config

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
)

// The overload section must configure the manager as the package's own
// defaults do. Its tunables are not visible on a Manager, so two are
// compared by what they do: one built from the section's Options and
// one from overload.New's defaults, each over the package's own
// resources (overload.MemoryResource, GC, Goroutines, OpenFiles) reading
// one scripted process on virtual time, and the same requests. Their
// thresholds and actions' levels (Status) must be equal, and their
// states, verdicts and resources' levels must agree at every step.

// overloadPhase is a stretch of the script.
type overloadPhase struct {
	steps    int // of 100 ms
	arrivals int // requests per step
	// mem and routines are the memory and goroutine readings (fractions
	// of their limits); 0: they grow with the requests in flight.
	mem, routines float64
	gc            float64 // the GC's share of the CPU
	files         float64 // open descriptors, fraction of the limit
}

// The script takes every resource through its levels and back: memory
// (0.3 + 0.008 per request in flight) and goroutines (0.4 + 0.006 per
// request) grow with the load until the in-flight cap holds them; then
// every resource goes through Elevated, High and Critical, and down into
// Elevated's hysteresis band (below its threshold, above it less half
// its margin); then the load drops and every action's cooldown runs out.
var overloadScript = []overloadPhase{
	{steps: 30, arrivals: 8, gc: 0.05, files: 0.1},
	{steps: 40, arrivals: 30, gc: 0.05, files: 0.3},
	{steps: 10, arrivals: 30, mem: 0.93, routines: 0.91, gc: 0.42, files: 0.72},
	{steps: 10, arrivals: 30, mem: 0.96, routines: 0.96, gc: 0.46, files: 0.87},
	{steps: 10, arrivals: 30, mem: 0.985, routines: 0.985, gc: 0.6, files: 0.96},
	{steps: 10, arrivals: 30, mem: 0.89, routines: 0.87, gc: 0.37, files: 0.66},
	{steps: 80, arrivals: 4, gc: 0.05, files: 0.1},
}

// overloadProcess is the scripted process one Manager watches.
type overloadProcess struct {
	m        *overload.Manager
	step     int
	p        overloadPhase
	gcTime   float64 // cumulative, seconds of 2 cores
	mem      overload.Reading
	gc       *pressure.GCCPU
	routines *pressure.Count
	files    *pressure.Count
	held     [][]bool // per step of arrival, which requests hold (Pass)
	verdicts []overload.Verdict
}

func newOverloadProcess(opts []overload.Option) *overloadProcess {
	pr := &overloadProcess{mem: overload.Reading{Value: 0.3, Cycle: 1}}
	pr.gc = pressure.NewGCCPU(pressure.WithGCSource(func() (float64, float64) {
		return pr.gcTime, float64(pr.step) * 0.1 * 2
	}))
	pr.routines = pressure.NewGoroutines(1000, pressure.WithCountSource(func() (int64, int64, error) {
		if pr.p.routines > 0 {
			return int64(pr.p.routines * 1000), 1000, nil
		}
		return 400 + 6*pr.m.InFlight(), 1000, nil
	}))
	pr.files = pressure.NewOpenFiles(pressure.WithCountSource(func() (int64, int64, error) {
		return int64(pr.p.files * 1024), 1024, nil
	}))
	res := []overload.Resource{
		overload.MemoryResource(func() overload.Reading { return pr.mem }),
		overload.GC(pr.gc), overload.Goroutines(pr.routines), overload.OpenFiles(pr.files),
	}
	pr.m = overload.New(append([]overload.Option{overload.WithResources(res...), overload.WithCollector(func() {})}, opts...)...)
	return pr
}

// bodies are the declared lengths of the requests of a step, in turn:
// none, a small one, one just under the limit (1 MB < 1 MiB), one above
// it, one undeclared.
var bodies = []int64{0, 0, 300, 1_000_000, 2 << 20, -1, 0}

// advance runs one step at now: the requests that end, the readings, the
// Manager's step, then the step's arrivals.
func (pr *overloadProcess) advance(now time.Time, p overloadPhase) {
	pr.p = p
	pr.step++
	pr.gcTime += p.gc * 0.1 * 2
	if len(pr.held) >= 3 { // a request holds its memory for 300 ms
		for _, h := range pr.held[0] {
			if h {
				pr.m.Exit()
			}
		}
		pr.held = pr.held[1:]
	}
	if pr.step%3 == 0 { // the live heap is measured by a collection every 300 ms
		v := p.mem
		if v == 0 {
			v = 0.3 + 0.008*float64(pr.m.InFlight())
		}
		pr.mem = overload.Reading{Value: v, Cycle: pr.mem.Cycle + 1, Time: now}
	}
	pr.gc.SampleAt(now)
	pr.routines.SampleAt(now)
	pr.files.SampleAt(now)
	pr.m.Step(now)
	var held []bool
	for i := range p.arrivals {
		c := levee.FromRank(i % levee.NumCriticalities)
		v := pr.m.EnterAt(now.Add(time.Duration(i)*time.Millisecond), c, bodies[i%len(bodies)])
		pr.verdicts = append(pr.verdicts, v)
		held = append(held, v == overload.Pass)
	}
	pr.held = append(pr.held, held)
}

// overloadDiffer runs the script through a Manager built with got and
// one built with want, and returns the first difference ("" when none).
func overloadDiffer(got, want []overload.Option) string {
	g, w := newOverloadProcess(got), newOverloadProcess(want)
	// What the Manager shows of its tunables: the thresholds and goals,
	// the actions' levels.
	type shown struct {
		Enter [overload.NumLevels - 1]float64
		Goal  float64
	}
	var sg, sw []any
	for _, st := range []struct {
		s   overload.Status
		out *[]any
	}{{g.m.Status(), &sg}, {w.m.Status(), &sw}} {
		for _, r := range st.s.Resources {
			*st.out = append(*st.out, r.Name, shown{r.Enter, r.Goal})
		}
		for _, a := range st.s.Actions {
			*st.out = append(*st.out, a.Action, a.Level)
		}
	}
	if !reflect.DeepEqual(sg, sw) {
		return fmt.Sprintf("thresholds and levels:\n got %v\nwant %v", sg, sw)
	}
	now := time.Unix(1_000_000, 0)
	for _, p := range overloadScript {
		for range p.steps {
			now = now.Add(100 * time.Millisecond)
			g.advance(now, p)
			w.advance(now, p)
			if sg, sw := g.m.State(), w.m.State(); !reflect.DeepEqual(sg, sw) {
				return fmt.Sprintf("at step %d:\n got %+v\nwant %+v", g.step, sg, sw)
			}
			if !reflect.DeepEqual(g.verdicts, w.verdicts) {
				return fmt.Sprintf("at step %d: verdicts differ", g.step)
			}
			for i, rg := range g.m.Status().Resources {
				if rw := w.m.Status().Resources[i]; rg.Level != rw.Level {
					return fmt.Sprintf("at step %d: %s at %v, want %v", g.step, rg.Name, rg.Level, rw.Level)
				}
			}
		}
	}
	return ""
}

func testOverloadDefaults(t *testing.T) {
	if d := overloadDiffer(Default().Overload.Options(), nil); d != "" {
		t.Errorf("Default().Overload.Options() differ from overload.New's defaults: %s", d)
	}
}

// TestOverloadScript checks that the script takes the Manager where the
// comparison needs it: every level, every action, the cap binding, every
// refusal.
func TestOverloadScript(t *testing.T) {
	pr := newOverloadProcess(nil)
	now := time.Unix(1_000_000, 0)
	var levels [overload.NumLevels]bool
	var actions [overload.NumActions]bool
	for _, p := range overloadScript {
		for range p.steps {
			now = now.Add(100 * time.Millisecond)
			pr.advance(now, p)
			s := pr.m.State()
			levels[s.Level] = true
			for a, on := range s.Active {
				actions[a] = actions[a] || on
			}
		}
	}
	if want := [overload.NumLevels]bool{true, true, true, true}; levels != want {
		t.Errorf("levels reached %v, want all", levels)
	}
	if want := [overload.NumActions]bool{true, true, true, true, true, true, true}; actions != want {
		t.Errorf("actions active %v, want all", actions)
	}
	if s := pr.m.State(); s.Level != overload.Normal || s.Active != ([overload.NumActions]bool{}) {
		t.Errorf("at the end: level %v, actions %v; want normal and none", s.Level, s.Active)
	}
	for _, v := range overload.Refusals() {
		if pr.m.Refused(v, levee.Sheddable) == 0 {
			t.Errorf("no SHEDDABLE request refused with %v", v)
		}
	}
}

// overloadPerturbations give the fields whose generic change the script
// cannot show a value that is valid and shows.
var overloadPerturbations = map[string]any{
	"period":                          200 * time.Millisecond, // the state lasts max(3 periods, 300ms)
	"min_in_flight":                   200,
	"in_flight_shares.sheddable_plus": 0.85,
	"resources.gc_cpu.goal":           0.3,
	"resources.open_files.goal":       0.5,
}

// TestOverloadDefaultsObservable changes each field of the overload
// section in turn and checks that the comparison sees the change.
func TestOverloadDefaultsObservable(t *testing.T) {
	for _, l := range leaves(Default()) {
		path, ok := strings.CutPrefix(l.path, "overload.")
		if !ok {
			continue
		}
		if path == "enabled" {
			continue // not an option of the Manager: whether Protect builds one (leveehttp's tests)
		}
		t.Run(path, func(t *testing.T) {
			cfg := Default()
			v := l.value(cfg)
			switch x, ok := overloadPerturbations[path]; {
			case ok:
				v.Set(reflect.ValueOf(x))
			case v.Type() == reflect.TypeFor[overload.Level]():
				v.Set(reflect.ValueOf(overload.Off))
			case strings.HasSuffix(path, ".elevated") || strings.HasSuffix(path, ".high") || strings.HasSuffix(path, ".critical"):
				v.SetFloat(v.Float() - 0.005) // the order kept
			case strings.HasSuffix(path, ".margin"):
				v.SetFloat(v.Float() / 2) // the script sits in the band this leaves
			default:
				perturb(path, v)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the changed value is invalid (add a perturbation): %v", err)
			}
			if d := overloadDiffer(cfg.Overload.Options(), nil); d == "" {
				t.Errorf("changing overload.%s shows no difference from overload.New's defaults", path)
			}
		})
	}
}
