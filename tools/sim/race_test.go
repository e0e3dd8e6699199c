//go:build race

package sim

// raceEnabled shrinks the scenario tests under the race detector, which
// slows the simulator down about thirtyfold.
const raceEnabled = true
