package admit

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"
)

// sampledGauge is a signal with a SampleAt method, like package pressure's.
type sampledGauge struct {
	v       atomic.Uint64
	samples atomic.Int64
}

func (g *sampledGauge) Name() string        { return "cpu" }
func (g *sampledGauge) Value() float64      { return math.Float64frombits(g.v.Load()) }
func (g *sampledGauge) Target() float64     { return 0.8 }
func (g *sampledGauge) SampleAt(time.Time)  { g.samples.Add(1) }
func (g *sampledGauge) set(v float64)       { g.v.Store(math.Float64bits(v)) }
func (g *sampledGauge) sampleCount() int64  { return g.samples.Load() }
func (c *Controller) lastStep() time.Time   { return time.Unix(0, c.stepped.Load()) }
func (c *Controller) pretendRunning(b bool) { c.running.Store(b) }

// TestLateTimerStepsFromAdmit: when Run's timers starve (a saturated
// process), the requests themselves sample the signals and step the
// controller.
func TestLateTimerStepsFromAdmit(t *testing.T) {
	g := &sampledGauge{}
	g.set(0.3)
	c := New(WithSignals(g))
	// Run is "active" but its goroutine never gets a core: the last step
	// and the clock are old.
	old := time.Now().Add(-time.Second)
	c.Step(old)
	c.pretendRunning(true)
	ctx := context.Background()
	for i := 0; i < 4*lateClockEvery; i++ {
		tk, err := c.Admit(ctx)
		if err != nil {
			t.Fatalf("Admit: %v", err)
		}
		tk.Done(nil)
	}
	if got := c.lastStep(); !got.After(old.Add(500 * time.Millisecond)) {
		t.Errorf("last step at %v, want a step run by Admit after the stale one at %v", got, old)
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

	// Without Run, Admit never steps by itself.
	c2 := New(WithSignals(g))
	c2.Step(old)
	before := g.sampleCount()
	for i := 0; i < 4*lateClockEvery; i++ {
		tk, _ := c2.Admit(ctx)
		tk.Done(nil)
	}
	if g.sampleCount() != before || !c2.lastStep().Equal(old) {
		t.Error("Admit stepped a controller whose Run is not active")
	}
}
