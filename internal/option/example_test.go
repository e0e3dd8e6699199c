package option_test

import (
	"fmt"

	"github.com/levee-dev/levee/internal/option"
)

func ExampleCheck() {
	withK := func(k float64) {
		option.Check(k == 0 || k >= 1, "throttle", "WithK", "must be ≥ 1 (0 means the default, 2)", k)
	}
	defer func() { fmt.Println(recover()) }()
	withK(2)
	withK(0.5)
	// Output:
	// throttle: WithK(0.5): must be ≥ 1 (0 means the default, 2)
}
