package overload

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// scripted is a resource whose reading the test sets.
type scripted struct {
	r   Reading
	res Resource
}

func newScripted(name string, enter [3]float64, goal float64) *scripted {
	s := &scripted{r: Reading{Value: math.NaN()}}
	s.res = Resource{Name: name, Enter: enter, Goal: goal, Read: func() Reading { return s.r }}
	return s
}

// fakeShedder records OverloadShed calls.
type fakeShedder struct {
	level float64
	until time.Time
	calls int
}

func (f *fakeShedder) OverloadShed(level float64, until time.Time) {
	f.level, f.until = level, until
	f.calls++
}

// recorder is an Effector that keeps every state it is given.
type recorder struct{ states []State }

func (r *recorder) Apply(s State) { r.states = append(r.states, s) }

var t0 = time.Unix(1_700_000_000, 0)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

func TestLevelsAndEvents(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	var events []Event
	m := New(WithResources(mem.res), WithObserver(func(e Event) { events = append(events, e) }))
	steps := []struct {
		v    float64
		want Level
	}{
		{0.5, Normal}, {0.85, Elevated}, {0.97, Critical}, {0.93, Critical},
		{0.89, High}, {0.7, Normal}, {math.NaN(), Normal},
	}
	for i, s := range steps {
		mem.r = Reading{Value: s.v}
		m.Step(ms(100 * i))
		if got := m.Level(); got != s.want {
			t.Fatalf("step %d, reading %v: level %v, want %v", i, s.v, got, s.want)
		}
	}
	var changes []string
	for _, e := range events {
		if e.Kind == LevelChanged {
			changes = append(changes, e.From.String()+">"+e.Level.String()+":"+e.Resource)
		}
	}
	want := strings.Join([]string{"normal>elevated:memory", "elevated>critical:memory", "critical>high:memory", "high>normal:"}, " ")
	if got := strings.Join(changes, " "); got != want {
		t.Errorf("level changes %q, want %q (each change reported once)", got, want)
	}
}

func TestOldReadingCountsForNothing(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	m := New(WithResources(mem.res), WithMaxAge(time.Second))
	mem.r = Reading{Value: 0.99, Time: ms(0)}
	m.Step(ms(0))
	if got := m.Level(); got != Critical {
		t.Fatalf("fresh reading 0.99: level %v, want critical", got)
	}
	// The sampler stopped: the same reading, ever older.
	m.Step(ms(1000))
	if got := m.Level(); got != Critical {
		t.Fatalf("reading 1s old: level %v, want critical", got)
	}
	m.Step(ms(1100))
	if got := m.Level(); got != Normal {
		t.Errorf("reading 1.1s old (max age 1s): level %v, want normal", got)
	}
}

func TestDriverIsTheHighestLevel(t *testing.T) {
	a := newScripted("a", [3]float64{0.5, 0.6, 0.7}, 0)
	b := newScripted("b", [3]float64{0.1, 0.9, 2}, 0)
	var got Event
	m := New(WithResources(a.res, b.res), WithObserver(func(e Event) {
		if e.Kind == LevelChanged {
			got = e
		}
	}))
	a.r, b.r = Reading{Value: 0.65}, Reading{Value: 0.8} // a at High; b far past its Elevated threshold
	m.Step(ms(0))
	if got.Level != High || got.Resource != "a" || got.Value != 0.65 {
		t.Errorf("level change %+v, want high driven by a at 0.65", got)
	}
}

func TestShedFloor(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	var sh fakeShedder
	m := New(WithResources(mem.res), WithShedder(&sh), WithShedFloors(0.5, 2, 3.5))
	steps := []struct {
		at    int
		v     float64
		floor float64 // the floor given at this step, 0 when none
	}{
		{0, 0.5, 0},
		{100, 0.82, 0.5},
		{200, 0.91, 2},
		{300, 0.99, 3.5},
		{400, 0.5, 3.5}, // the level fell: the floor holds for the cooldown (1s)
		{1300, 0.5, 3.5},
		{1400, 0.5, 0}, // 1s below: the action ends, and nothing is called
		{1500, 0.5, 0},
	}
	for _, s := range steps {
		calls := sh.calls
		mem.r = Reading{Value: s.v}
		m.Step(ms(s.at))
		switch {
		case s.floor == 0 && sh.calls != calls:
			t.Errorf("t=%dms: OverloadShed(%v) called, want no call", s.at, sh.level)
		case s.floor > 0 && (sh.calls != calls+1 || sh.level != s.floor):
			t.Errorf("t=%dms: OverloadShed level %v (%d calls), want %v once", s.at, sh.level, sh.calls-calls, s.floor)
		case s.floor > 0 && !sh.until.Equal(ms(s.at+300)):
			t.Errorf("t=%dms: OverloadShed until %v, want 300 ms later (3 periods), so that it ends by itself", s.at, sh.until.Sub(ms(s.at)))
		}
	}
}

// enter is EnterAt that ends the request at once when it passed.
func enter(m *Manager, at time.Time, c levee.Criticality, body int64) Verdict {
	v := m.EnterAt(at, c, body)
	if v == Pass {
		m.Exit()
	}
	return v
}

func TestGateActions(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	m := New(WithResources(mem.res), WithBodyLimit(1000))
	type req struct {
		c    levee.Criticality
		body int64
		want Verdict
	}
	crit, plus, shed := levee.Critical, levee.CriticalPlus, levee.Sheddable
	steps := []struct {
		at   int
		v    float64
		reqs []req
	}{
		{0, 0.5, []req{{crit, 1 << 30, Pass}, {crit, -1, Pass}, {shed, 0, Pass}}},
		{100, 0.85, []req{{crit, 1000, Pass}, {crit, 1001, RefuseBody}, {crit, -1, RefuseBody}, {plus, 1 << 30, Pass}, {shed, 0, Pass}}},
		{200, 0.96, []req{{crit, 0, RefuseCriticalOnly}, {shed, 0, RefuseCriticalOnly}, {plus, 0, Pass}, {plus, -1, Pass}, {levee.Criticality(9), 0, RefuseCriticalOnly}}},
		{300, 0.5, []req{{crit, 0, RefuseCriticalOnly}}}, // cooldown 1s
		{1300, 0.5, []req{{crit, 0, Pass}, {crit, 5000, Pass}}},
	}
	for _, s := range steps {
		mem.r = Reading{Value: s.v}
		m.Step(ms(s.at))
		for _, r := range s.reqs {
			if got := enter(m, ms(s.at+1), r.c, r.body); got != r.want {
				t.Errorf("t=%dms reading %v: %v with body %d: %v, want %v", s.at, s.v, r.c, r.body, got, r.want)
			}
		}
	}
	if got := m.Refused(RefuseCriticalOnly, levee.Critical); got != 3 {
		t.Errorf("refused critical-only CRITICAL: %d, want 3", got)
	}
	if got := m.Refused(RefuseCriticalOnly, levee.Critical) + m.Refused(RefuseCriticalOnly, levee.CriticalPlus); got != 3 {
		t.Errorf("CRITICAL_PLUS refused %d times, want never", got-3)
	}
	if got := m.InFlight(); got != 0 {
		t.Errorf("in flight %d after every request ended, want 0", got)
	}
}

// TestGateExpires: a Manager that stops stepping leaves no refusal
// behind: the gate of its last step expires 3 periods later.
func TestGateExpires(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	m := New(WithResources(mem.res), WithPeriod(200*time.Millisecond))
	mem.r = Reading{Value: 0.99}
	m.Step(ms(0))
	if got := enter(m, ms(600), levee.Critical, 0); got != RefuseCriticalOnly {
		t.Fatalf("600 ms after the last step: %v, want critical_only", got)
	}
	if got := enter(m, ms(601), levee.Critical, 0); got != Pass {
		t.Errorf("601 ms after the last step (3 periods of 200 ms): %v, want pass", got)
	}
	if st := m.State(); !st.Until.Equal(ms(600)) {
		t.Errorf("State.Until %v after the step, want 600 ms", st.Until.Sub(t0))
	}
}

func TestStopEndsEverything(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	var rec recorder
	var ended []Action
	m := New(WithResources(mem.res), WithObserver(func(e Event) {
		if e.Kind == ActionEnded {
			ended = append(ended, e.Action)
		}
	}))
	m.Attach(&rec)
	mem.r = Reading{Value: 0.99}
	m.Step(ms(0))
	m.Stop(ms(50))
	if got := enter(m, ms(51), levee.Sheddable, -1); got != Pass {
		t.Errorf("after Stop: %v, want pass", got)
	}
	last := rec.states[len(rec.states)-1]
	if last.Level != Normal || last.Active != ([NumActions]bool{}) {
		t.Errorf("effectors' last state %+v, want normal and nothing active", last)
	}
	// Shed, LargeBodies, KeepAlive, Timeouts, CriticalOnly, Collect.
	if len(ended) != 6 {
		t.Errorf("ended %v, want every active action", ended)
	}
}

func TestEffectorState(t *testing.T) {
	fds := newScripted("open_files", [3]float64{0.7, 0.85, 0.95}, 0)
	var rec recorder
	m := New(WithResources(fds.res), WithTimeouts(300*time.Millisecond, 0), WithCooldown(KeepAlive, 2*time.Second),
		WithCooldown(Timeouts, time.Second), WithAction(Timeouts, Elevated), WithAction(LargeBodies, Off))
	m.Attach(&rec)
	script := []struct {
		at                int
		v                 float64
		keepOff, timeouts bool
	}{
		{0, 0.5, false, false},
		{100, 0.75, false, true}, // Timeouts moved to Elevated
		{200, 0.9, true, true},
		{300, 0.1, true, true},
		{1300, 0.1, true, false}, // Timeouts' cooldown 1s, KeepAlive's 2s
		{2300, 0.1, false, false},
	}
	for _, s := range script {
		fds.r = Reading{Value: s.v}
		m.Step(ms(s.at))
		st := rec.states[len(rec.states)-1]
		if st.Active[KeepAlive] != s.keepOff || st.Active[Timeouts] != s.timeouts {
			t.Errorf("t=%dms reading %v: keep-alive off %v, short timeouts %v; want %v, %v",
				s.at, s.v, st.Active[KeepAlive], st.Active[Timeouts], s.keepOff, s.timeouts)
		}
		if st.IdleTimeout != 300*time.Millisecond || st.HeaderTimeout != 2*time.Second {
			t.Errorf("timeouts %v, %v, want 300ms and the default 2s", st.IdleTimeout, st.HeaderTimeout)
		}
	}
	if got := enter(m, ms(300), levee.Critical, -1); got != Pass {
		t.Errorf("LargeBodies off: a body of unknown length: %v, want pass", got)
	}
}

func TestCollect(t *testing.T) {
	var calls int
	done := make(chan struct{}, 16)
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	m := New(WithResources(mem.res), WithCollector(func() { calls++; done <- struct{}{} }), WithStaleAfter(300*time.Millisecond))
	step := func(at int, v float64, cycle uint64) {
		mem.r = Reading{Value: v, Cycle: cycle}
		m.Step(ms(at))
	}
	wait := func() {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("no collection")
		}
		for m.collecting.Load() {
			time.Sleep(time.Millisecond)
		}
	}
	step(0, 0.5, 7)
	step(400, 0.5, 7) // stale, but normal: nothing
	step(500, 0.91, 7)
	wait() // high and stale: a collection
	step(600, 0.91, 7)
	step(700, 0.91, 7) // a collection was just made: wait 300 ms
	if calls != 1 {
		t.Fatalf("%d collections, want 1 within a staleness period", calls)
	}
	step(800, 0.91, 7)
	wait()
	step(900, 0.91, 8) // renewed
	step(1100, 0.91, 8)
	if calls != 2 {
		t.Errorf("%d collections, want 2 (none while the measurement is fresh)", calls)
	}
	if got := m.Status().Collections; got != 2 {
		t.Errorf("Status().Collections %d, want 2", got)
	}
}

func TestStatusJSON(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0.7)
	mem.res.Unit = "bytes"
	gc := newScripted("gc_cpu", [3]float64{0.3, 0.4, 0.48}, 0)
	m := New(WithResources(mem.res, gc.res))
	mem.r = Reading{Value: 0.96, Used: 960, Limit: 1000, Time: ms(0)}
	m.Step(ms(0))
	enter(m, ms(1), levee.Sheddable, 0)
	m.Step(ms(250))
	s := m.Status()
	if s.Level != Critical || !s.Actions[CriticalOnly].Active || s.Actions[CriticalOnly].ActiveSeconds != 0.25 {
		t.Fatalf("status %+v: want critical, critical_only active for 0.25 s", s)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"level":"critical"`, `"name":"gc_cpu","value":null`, `"used":960`, `"limit":1000`,
		`"action":"critical_only","level":"critical","active":true`, `"critical_only":{`, `"SHEDDABLE":1`, `"active_seconds":0.25`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
}

func TestOptionErrors(t *testing.T) {
	ok := Resource{Name: "x", Read: func() Reading { return Reading{} }}
	bad := []struct {
		name string
		opt  Option
	}{
		{"empty name", WithResources(Resource{Read: ok.Read})},
		{"nil read", WithResources(Resource{Name: "x"})},
		{"descending", WithResources(Resource{Name: "x", Read: ok.Read, Enter: [3]float64{0.9, 0.8, 0}})},
		{"repeated", WithResources(ok, ok)},
		{"negative goal", WithResources(Resource{Name: "x", Read: ok.Read, Goal: -1})},
		{"period", WithPeriod(time.Millisecond)},
		{"action", WithAction(NumActions, High)},
		{"level", WithAction(Shed, 4)},
		{"floors", WithShedFloors(2, 1, 3)},
		{"shares", WithInFlightShares(0.9, 0.8)},
		{"timeouts", WithTimeouts(time.Millisecond, 0)},
		{"cooldown", WithCooldown(Shed, -time.Second)},
		{"thresholds", WithThresholds("x", Thresholds{Enter: [3]float64{0.9, 0.8, 0}})},
		{"thresholds' margin", WithThresholds("x", Thresholds{Margin: -0.1})},
	}
	for _, b := range bad {
		func() {
			defer func() {
				r := recover()
				if err, isErr := r.(error); !isErr || !strings.HasPrefix(err.Error(), "overload: ") {
					t.Errorf("%s: recovered %v, want an overload: option error", b.name, r)
				}
			}()
			New(b.opt)
		}()
	}
	New(WithResources(Resource{Name: "x", Read: ok.Read, Enter: [3]float64{0.9, 0, 0.95}})) // a gap is fine
}
