package suggest_test

import (
	"fmt"

	"github.com/levee-dev/levee/internal/suggest"
)

func ExampleHint() {
	fields := []string{"capacity_rps", "capacity_tier", "phases"}
	fmt.Printf("unknown field %q%s\n", "capacity_rsp", suggest.Hint("capacity_rsp", fields))
	// Output: unknown field "capacity_rsp" (did you mean "capacity_rps"?)
}
