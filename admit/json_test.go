package admit_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

type oddSignal struct {
	name   string
	v, tgt float64
}

func (s oddSignal) Name() string    { return s.name }
func (s oddSignal) Value() float64  { return s.v }
func (s oddSignal) Target() float64 { return s.tgt }

// TestSnapshotJSON: a Snapshot encodes as JSON from the first instant
// (before any sample, its signals read NaN), and whatever the signals
// report later (infinite values, no target); a value without a reading is
// null.
func TestSnapshotJSON(t *testing.T) {
	ctl := admit.New(admit.WithSignals(
		oddSignal{"none-yet", math.NaN(), 0.8},
		oddSignal{"inf", math.Inf(1), 0.8},
		oddSignal{"neg-inf", math.Inf(-1), 0.8},
		oddSignal{"no-target", 0.5, 0},
		oddSignal{"nan-target", 0.5, math.NaN()},
	))
	check := func(when string) {
		b, err := json.Marshal(ctl.Snapshot())
		if err != nil {
			t.Fatalf("%s: json.Marshal(Snapshot) = %v", when, err)
		}
		if !strings.Contains(string(b), `"Value":null`) {
			t.Errorf("%s: a signal without a reading should encode its Value as null: %s", when, b)
		}
	}
	check("before the first Step")
	now := time.Now()
	for i := range 40 {
		for range 20 {
			if tk, err := ctl.AdmitAt(context.Background(), now); err == nil {
				tk.DoneAt(now, nil)
			}
		}
		now = now.Add(admit.DefaultPeriod)
		ctl.Step(now)
		if i == 0 {
			check("after the first Step")
		}
	}
	check("after 40 Steps with an infinite signal")
}
