package admit_test

import (
	"context"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// learningSignal is a fixedSignal that records what the controller tells
// it of its shedding (as pressure.QueueDelay's SetShedding).
type learningSignal struct {
	*fixedSignal
	told []bool
}

func (s *learningSignal) SetShedding(on bool) { s.told = append(s.told, on) }

// TestLearnersToldShedding: a signal that learns its target from the
// service is told, every period, whether the controller sheds — true
// from the period an overload episode starts, false again once it ends —
// so that an episode's readings teach it nothing.
func TestLearnersToldShedding(t *testing.T) {
	sig := &learningSignal{fixedSignal: newFixedSignal(0.5, 1)}
	const period = 100 * time.Millisecond
	c := admit.New(admit.WithSignals(sig), admit.WithPeriod(period))
	now := time.Unix(1000, 0)
	step := func(n int) {
		for range n {
			for range 100 { // 1,000 requests a second
				if tk, err := c.AdmitAt(context.Background(), now); err == nil {
					tk.Done(nil)
				}
			}
			now = now.Add(period)
			c.Step(now)
		}
	}
	step(30)
	for i, on := range sig.told {
		if on {
			t.Fatalf("period %d: told shedding at load 0.5", i+1)
		}
	}
	if len(sig.told) != 30 {
		t.Fatalf("told %d times in 30 periods; want every period", len(sig.told))
	}
	sig.set(3)
	step(5)
	if !c.Snapshot().Overloaded || !sig.told[len(sig.told)-1] {
		t.Fatalf("at load 3: overloaded %v, last told %v; want both true", c.Snapshot().Overloaded, sig.told[len(sig.told)-1])
	}
	sig.set(0.2)
	step(200)
	if c.Snapshot().Overloaded || sig.told[len(sig.told)-1] {
		t.Fatalf("20 s after the load fell: overloaded %v, last told %v; want both false", c.Snapshot().Overloaded, sig.told[len(sig.told)-1])
	}
}
