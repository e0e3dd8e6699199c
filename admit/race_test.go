//go:build race

package admit_test

// raceEnabled trims the virtual-time scenarios to one seed under the race
// detector, which slows them ~20×; the full five run without it.
const raceEnabled = true
