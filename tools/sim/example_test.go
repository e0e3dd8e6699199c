package sim_test

import (
	"fmt"

	"github.com/levee-dev/levee/tools/sim"
)

// A client making up to 3 attempts against a backend that refuses every
// request multiplies the load it sends by 3; with levee's retry budget only
// about 10% of requests are retried.
func Example() {
	s, err := sim.Parse([]byte(`
name: retries
phases:
  - {name: all, duration: 20s}
clients:
  - {name: users, rate_rps: 100, target: backend, timeout: 1s, retry: {attempts: 3}}
tiers:
  - {name: backend, service: {mean: 1ms}}
events:
  - {at: 0s, kind: fail, tier: backend}
runs:
  - {name: naive, protection: none}
  - {name: levee, protection: levee, throttle: false}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	rep := sim.Run(s, sim.Options{Seed: 1})
	for _, r := range rep.Runs {
		p := r.Phases[0]
		fmt.Printf("%s: %.1f attempts per request\n", r.Name, p.AttemptedRPS/p.OfferedRPS)
	}
	// Output:
	// naive: 3.0 attempts per request
	// levee: 1.1 attempts per request
}
