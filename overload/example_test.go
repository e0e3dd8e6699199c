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

// Thresholds from a configuration, changed while the Manager runs: the
// reading 0.85 is Normal under the memory resource's own thresholds and
// Elevated under lower ones.
func ExampleManager_Reconfigure() {
	used := 0.85
	mem := overload.MemoryResource(func() overload.Reading { return overload.Reading{Value: used} })
	m := overload.New(overload.WithResources(mem))
	now := time.Unix(0, 0)
	m.Step(now)
	fmt.Println("own thresholds:", m.Level())

	lower := overload.Thresholds{Enter: [3]float64{0.8, 0.9, 0.95}, Margin: 0.02, Goal: 0.75}
	if err := m.Reconfigure(overload.WithThresholds("memory", lower)); err != nil {
		fmt.Println(err)
	}
	m.Step(now.Add(100 * time.Millisecond))
	fmt.Println("lower thresholds:", m.Level())

	err := m.Reconfigure(overload.WithShedFloors(3, 2, 1))
	fmt.Println(err)
	// Output:
	// own thresholds: normal
	// lower thresholds: elevated
	// overload: WithShedFloors(3, 2, 1): each must be in [0, 4], not descending
}
