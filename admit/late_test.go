package admit

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// sampledGauge is a signal with a SampleAt method, like package pressure's.
type sampledGauge struct {
	v       atomic.Uint64
	samples atomic.Int64
}

func (g *sampledGauge) Name() string       { return "cpu" }
func (g *sampledGauge) Value() float64     { return math.Float64frombits(g.v.Load()) }
func (g *sampledGauge) Target() float64    { return 0.8 }
func (g *sampledGauge) SampleAt(time.Time) { g.samples.Add(1) }
func (g *sampledGauge) set(v float64)      { g.v.Store(math.Float64bits(v)) }
func (g *sampledGauge) sampleCount() int64 { return g.samples.Load() }

// lastStep returns the time of the last Step on the controller's scale.
func (c *Controller) lastStep() int64       { return c.stepped.Load() }
func (c *Controller) pretendRunning(b bool) { c.running.Store(b) }

// fakeClock is a monotonic clock a test advances by hand.
type fakeClock struct{ t atomic.Int64 }

func (f *fakeClock) now() int64              { return f.t.Load() }
func (f *fakeClock) advance(d time.Duration) { f.t.Add(int64(d)) }

// withFakeClock returns a Controller whose real-time path reads a fake
// clock that starts at 1 s.
func withFakeClock(opts ...Option) (*Controller, *fakeClock) {
	c := New(opts...)
	f := &fakeClock{}
	f.t.Store(int64(time.Second))
	c.clk = f
	c.stepped.Store(f.now())
	return c, f
}

// TestLateTimerStepsFromAdmit: when Run's timers starve (a saturated
// process), the requests themselves sample the signals and step the
// controller.
func TestLateTimerStepsFromAdmit(t *testing.T) {
	g := &sampledGauge{}
	g.set(0.3)
	c, clk := withFakeClock(WithSignals(g))
	// Run is "active" but its goroutine never gets a core: the last step
	// and the clock are a second old.
	c.stepReal(clk.now(), false)
	old := c.lastStep()
	c.clock.Store(clk.now())
	c.pretendRunning(true)
	clk.advance(time.Second)
	ctx := context.Background()
	for i := 0; i < 4*lateClockEvery; i++ {
		tk, err := c.Admit(ctx)
		if err != nil {
			t.Fatalf("Admit: %v", err)
		}
		tk.Done(nil)
	}
	if got := c.lastStep(); got != clk.now() {
		t.Errorf("last step at %v, want a step run by Admit at %v (the stale one was at %v)", time.Duration(got), time.Duration(clk.now()), time.Duration(old))
	}
	if g.sampleCount() == 0 {
		t.Error("Admit stepped without sampling the signal")
	}
	// Steps follow the period, not every sampled Admit.
	steps := g.sampleCount()
	for i := 0; i < 4*lateClockEvery; i++ {
		tk, _ := c.Admit(ctx)
		tk.Done(nil)
	}
	if g.sampleCount() != steps {
		t.Errorf("%d more late steps within one period, want none", g.sampleCount()-steps)
	}
}

// overloadDriver offers, every millisecond of fake time, one SHEDDABLE
// and one CRITICAL request through the real-time path (Admit), and
// counts SHEDDABLE rejections.
type overloadDriver struct {
	c   *Controller
	clk *fakeClock
}

func (d overloadDriver) run(dur time.Duration, step func()) (sheddable, rejected int) {
	shed := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable})
	crit := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Critical})
	for range int(dur / time.Millisecond) {
		d.clk.advance(time.Millisecond)
		if d.c.running.Load() {
			d.c.clock.Store(d.clk.now()) // Run's 10 ms ticker, at 1 ms
		}
		for _, ctx := range []context.Context{shed, crit} {
			tk, err := d.c.Admit(ctx)
			if ctx == shed {
				sheddable++
				if err != nil {
					rejected++
				}
			}
			tk.Done(nil)
		}
		if step != nil && d.clk.now()%int64(DefaultPeriod) == 0 {
			step()
		}
	}
	return sheddable, rejected
}

// quietAfter runs 5 s, then checks that the second after it rejects no
// SHEDDABLE request.
func (d overloadDriver) quietAfter(t *testing.T, what string) {
	t.Helper()
	d.run(5*time.Second, nil)
	if _, rej := d.run(time.Second, nil); rej != 0 {
		t.Errorf("%s: %d SHEDDABLE rejected 5–6 s later, want 0", what, rej)
	}
}

// TestAdmitStepsWithoutRun: a Controller whose Run was never started used
// to never shed and say nothing. Admit now steps it when no Step has run
// for two periods, and logs that once.
func TestAdmitStepsWithoutRun(t *testing.T) {
	var buf bytes.Buffer
	g := &sampledGauge{}
	g.set(0.4)
	c, clk := withFakeClock(WithSignals(g), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	d := overloadDriver{c, clk}
	if _, rej := d.run(2*time.Second, nil); rej != 0 {
		t.Errorf("below target: %d SHEDDABLE rejections, want 0", rej)
	}
	g.set(1.6) // load 2: CRITICAL alone is twice what fits
	d.run(time.Second, nil)
	n, rej := d.run(2*time.Second, nil)
	if rej < n*9/10 {
		t.Errorf("load 2 without Run: %d of %d SHEDDABLE rejected, want ≥ 90%%", rej, n)
	}
	if got := strings.Count(buf.String(), "Step is not being called"); got != 1 {
		t.Errorf("logged the missing Run %d times, want once:\n%s", got, buf.String())
	}
	g.set(0.2)
	d.quietAfter(t, "back below target")
}

// TestRunStopped: after Run's ctx is done, the last plan used to stay in
// force for good (every SHEDDABLE request rejected with the signal back at
// 0). Now Admit steps the controller itself: with the signal at 0 the
// shedding ends as it would under Run.
func TestRunStopped(t *testing.T) {
	g := &sampledGauge{}
	g.set(1.6)
	c, clk := withFakeClock(WithSignals(g), WithLogger(slog.New(slog.DiscardHandler)))
	c.clock.Store(clk.now())
	c.pretendRunning(true) // as Run: the ticker refreshes the clock, the step ticker steps
	d := overloadDriver{c, clk}
	if n, rej := d.run(3*time.Second, func() { c.stepReal(clk.now(), false) }); rej < n*9/10 {
		t.Fatalf("overloaded under Run: %d of %d SHEDDABLE rejected, want ≥ 90%%", rej, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c.Run(ctx) // starts, steps once, sees ctx done and stops, as on shutdown
	if c.running.Load() || c.clock.Load() != 0 {
		t.Fatal("Run left the controller marked running")
	}
	g.set(0)
	d.quietAfter(t, "Run stopped, signal at 0")
}

// TestPlanExpires: a plan that no Step refreshes is applied for planLife
// periods, then nothing is shed.
func TestPlanExpires(t *testing.T) {
	g := &sampledGauge{}
	c := New(WithSignals(g))
	t0 := time.Unix(1_700_000_000, 0)
	shed := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable})
	crit := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Critical})
	now := t0
	for i := range 100 {
		if i == 20 {
			g.set(1.6)
		}
		for range 50 {
			for _, ctx := range []context.Context{shed, crit} {
				tk, _ := c.AdmitAt(ctx, now)
				tk.DoneAt(now, nil)
			}
		}
		now = now.Add(DefaultPeriod)
		c.Step(now)
	}
	for _, tc := range []struct {
		after int // periods after the last Step
		want  bool
	}{{0, true}, {planLife - 1, true}, {planLife + 1, false}, {100, false}} {
		at := now.Add(time.Duration(tc.after) * DefaultPeriod)
		_, err := c.AdmitAt(shed, at)
		if got := err != nil; got != tc.want {
			t.Errorf("%d periods after the last Step: SHEDDABLE rejected = %v, want %v", tc.after, got, tc.want)
		}
	}
}

// TestWallClockStepsBack: Step and AdmitAt are given wall-clock times
// (no monotonic reading, as a clock converted to Unix time gives them),
// and the clock steps back an hour just before a 6× overload. The
// controller used to ignore every Step until the clock caught up: nothing
// was shed and the snapshot's time stopped. Now a Step back in time counts
// as one period, and control goes on.
func TestWallClockStepsBack(t *testing.T) {
	g := &sampledGauge{}
	g.set(0.4)
	c := New(WithSignals(g))
	wall := time.Unix(1_700_000_000, 0) // no monotonic reading
	shed := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable})
	crit := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Critical})
	var n, rej int
	var times []time.Time
	for i := range 200 {
		if i == 60 {
			wall = wall.Add(-time.Hour)
			g.set(1.6 * 3) // load 6
		}
		for range 50 {
			for _, ctx := range []context.Context{shed, crit} {
				tk, err := c.AdmitAt(ctx, wall)
				if ctx == shed && i >= 80 {
					n++
					if err != nil {
						rej++
					}
				}
				tk.DoneAt(wall, nil)
			}
		}
		wall = wall.Add(DefaultPeriod)
		c.Step(wall)
		if i >= 60 {
			times = append(times, c.Snapshot().Time)
		}
	}
	if rej < n*9/10 {
		t.Errorf("6× overload after the clock stepped back: %d of %d SHEDDABLE rejected, want ≥ 90%%", rej, n)
	}
	for i := 1; i < len(times); i++ {
		if !times[i].After(times[i-1]) {
			t.Fatalf("snapshot time stopped after the clock stepped back: %v then %v", times[i-1], times[i])
		}
	}
}
