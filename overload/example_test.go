package overload_test

import (
	"fmt"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/overload"
)

// A resource read from a variable, stepped on virtual time: the level
// and the gate's answers follow the reading, and the actions end a
// cooldown after it falls.
func Example() {
	used := 0.5 // fraction of the limit
	m := overload.New(overload.WithResources(overload.Resource{
		Name:  "memory",
		Read:  func() overload.Reading { return overload.Reading{Value: used} },
		Enter: [3]float64{0.92, 0.95, 0.98},
	}))
	t0 := time.Unix(0, 0)
	ask := func(now time.Time, c levee.Criticality) overload.Verdict {
		v := m.EnterAt(now, c, 0)
		if v == overload.Pass {
			m.Exit() // the request ends at once
		}
		return v
	}
	for i, u := range []float64{0.5, 0.93, 0.99, 0.5, 0.5, 0.5} {
		used = u
		now := t0.Add(time.Duration(i) * 600 * time.Millisecond)
		m.Step(now)
		fmt.Printf("%.2f %-8v CRITICAL %-13v CRITICAL_PLUS %v\n", u, m.Level(),
			ask(now, levee.Critical), ask(now, levee.CriticalPlus))
	}
	// Output:
	// 0.50 normal   CRITICAL pass          CRITICAL_PLUS pass
	// 0.93 elevated CRITICAL pass          CRITICAL_PLUS pass
	// 0.99 critical CRITICAL critical_only CRITICAL_PLUS pass
	// 0.50 normal   CRITICAL critical_only CRITICAL_PLUS pass
	// 0.50 normal   CRITICAL critical_only CRITICAL_PLUS pass
	// 0.50 normal   CRITICAL pass          CRITICAL_PLUS pass
}
