package scenarios_test

import (
	"fmt"
	"strings"

	"github.com/levee-dev/levee/scenarios"
)

func Example() {
	fmt.Println(strings.Join(scenarios.Names(), " "))
	y, ok := scenarios.Get("avalanche")
	fmt.Println(ok, strings.HasPrefix(string(y), "name: avalanche"))
	// Output:
	// amplification avalanche lose-site metastable throttle
	// true true
}
