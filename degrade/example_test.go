package degrade_test

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee/degrade"
)

func Example() {
	d := degrade.New() // level 1 at load 0.85, max level 3
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, load := range []float64{0.5, 0.87, 0.97, 1.2} {
		fmt.Printf("load %.2f -> level %d\n", load, d.StepAt(t0.Add(time.Duration(i)*time.Second), load))
	}

	// A drill: force level 2 for one minute.
	d.Force(2, t0.Add(time.Minute))
	ctx := degrade.WithLevel(context.Background(), d.Level())
	fmt.Println("handler sees level", degrade.FromContext(ctx))
	fmt.Println("after the drill:", d.StepAt(t0.Add(2*time.Minute), 1.0))
	// Output:
	// load 0.50 -> level 0
	// load 0.87 -> level 1
	// load 0.97 -> level 3
	// load 1.20 -> level 3
	// handler sees level 2
	// after the drill: 3
}
