package loopback

import (
	"errors"
	"fmt"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
)

// The phases of a cost-per-answer measurement (CostPhases): no load for
// CostIdle (the backend's own loops, subtracted), a warm-up, then
// CostPhase at the rate asked for, then a short tail so that the CPU trace
// covers the phase's end.
const (
	CostIdle  = time.Second
	costWarm  = 500 * time.Millisecond
	CostPhase = 2 * time.Second
	costTail  = 300 * time.Millisecond
)

// CostPhases are the load phases of a cost-per-answer measurement at
// rate requests a second; the third is the measured one.
func CostPhases(rate float64) []load.Phase {
	return []load.Phase{
		{Name: "idle", Rate: 0, Duration: CostIdle},
		{Name: "warm", Rate: rate, Duration: costWarm},
		{Name: "measured", Rate: rate, Duration: CostPhase},
		{Name: "tail", Rate: 0, Duration: costTail},
	}
}

// Cost is one measurement of a backend's CPU per answer.
type Cost struct {
	// Micros is the backend's CPU over the measured phase, less its idle
	// CPU, per answer, microseconds.
	Micros float64 `json:"us_per_answer"`
	// Answered and Rejected count the backend's answers in the phase and
	// the rejections among them; CPU is its CPU time over the phase,
	// IdleShare its CPU ÷ wall time with no load.
	Answered  float64 `json:"answered"`
	Rejected  float64 `json:"rejected"`
	CPU       float64 `json:"cpu_s"`
	IdleShare float64 `json:"idle_share"`
}

// CostOf computes the cost per answer of a run of CostPhases(rate): lr is
// the generator's result, cpu the backend's CPU trace (TraceCPU) and s its
// series of answers. It fails when the trace does not cover the phases or
// the backend answered less than half of what was offered.
func CostOf(lr *load.Result, cpu *CPUTrace, s backend.Series, rate float64) (Cost, error) {
	if len(lr.Phases) < 3 {
		return Cost{}, fmt.Errorf("loopback: %d phases in a cost run, want those of CostPhases", len(lr.Phases))
	}
	st := lr.Start
	idle, ok1 := cpu.Used(st.Add(100*time.Millisecond), st.Add(CostIdle))
	ph := lr.Phases[2]
	from, to := st.Add(ph.Offset), st.Add(ph.Offset+ph.Duration)
	busy, ok2 := cpu.Used(from, to)
	c := Cost{
		Rejected:  seriesSum(s, s.Rejected, from, to),
		CPU:       busy,
		IdleShare: idle / (CostIdle - 100*time.Millisecond).Seconds(),
	}
	c.Answered = c.Rejected + seriesSum(s, s.OK, from, to) + seriesSum(s, s.Other, from, to)
	if !ok1 || !ok2 {
		return c, fmt.Errorf("loopback: the CPU trace does not cover the phase")
	}
	if c.Answered < 0.5*rate*ph.Duration.Seconds() {
		return c, fmt.Errorf("loopback: the backend answered %.0f of %.0f requests", c.Answered, rate*ph.Duration.Seconds())
	}
	c.Micros = 1e6 * (busy - c.IdleShare*ph.Duration.Seconds()) / c.Answered
	return c, nil
}

// seriesSum sums a backend series (buckets by completion time from
// s.Start) over [from, to).
func seriesSum(s backend.Series, xs []int64, from, to time.Time) float64 {
	if s.Resolution <= 0 {
		return 0
	}
	var n int64
	for k := max(int(from.Sub(s.Start)/s.Resolution), 0); k < int(to.Sub(s.Start)/s.Resolution) && k < len(xs); k++ {
		n += xs[k]
	}
	return float64(n)
}

// Cheapest runs each measurement in turn, rounds times, alternated so
// that a neighbour's noise falls on all of them, and returns the lowest
// cost of each: noise only adds CPU. A failed round is skipped; a
// measurement none of whose rounds succeeded makes the error, which joins
// the failures.
func Cheapest(rounds int, measure ...func() (Cost, error)) ([]Cost, error) {
	best := make([]Cost, len(measure))
	ok := make([]bool, len(measure))
	var errs []error
	for range max(1, rounds) {
		for i, m := range measure {
			c, err := m()
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if !ok[i] || c.Micros < best[i].Micros {
				best[i], ok[i] = c, true
			}
		}
	}
	for i := range ok {
		if !ok[i] {
			return best, fmt.Errorf("loopback: measurement %d of %d never succeeded: %w", i+1, len(measure), errors.Join(errs...))
		}
	}
	return best, nil
}
