package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
)

// The phases of a rejection-cost measurement: no load for costIdle (the
// backend's own loops, subtracted), a warm-up, then costPhase at the rate
// asked for, then a short tail so that the CPU trace covers the phase's
// end.
const (
	costIdle  = time.Second
	costWarm  = 500 * time.Millisecond
	costPhase = 2 * time.Second
	costTail  = 300 * time.Millisecond
)

// Cost is one measurement of the server CPU per answer.
type Cost struct {
	// Micros is the backend's CPU over the phase, less its idle CPU, per
	// answer, microseconds.
	Micros float64 `json:"us_per_answer"`
	// Answered and Rejected count the backend's answers in the phase and
	// the rejections among them; CPU is its CPU time over the phase,
	// IdleShare its CPU ÷ wall time with no load.
	Answered  float64 `json:"answered"`
	Rejected  float64 `json:"rejected"`
	CPU       float64 `json:"cpu_s"`
	IdleShare float64 `json:"idle_share"`
}

// AnswerCost measures the backend CPU one answer costs: a backend with
// the given protection and options, doing 1 µs of work per request, is
// offered rate requests a second by clients that never retry, while this
// process reads its CPU time from /proc every 50 ms; the CPU over the
// phase, less the idle CPU, is divided by the requests it answered. Noise
// from other processes only adds CPU, so the lowest of rounds
// measurements is kept. With a protection forced to refuse everything
// (backend.LeveeOptions.ForceOverload for levee) it is the cost of a
// rejection; with backend.None, the cost of serving a request that does
// almost nothing: what net/http, the kernel's loopback and the counters
// cost any answer.
func AnswerCost(ctx context.Context, protection string, o backend.LeveeOptions, rate float64, rounds int) (Cost, error) {
	best := Cost{Micros: -1}
	var lastErr error
	for range max(1, rounds) {
		c, err := answerCost(ctx, protection, o, rate)
		if err != nil {
			lastErr = err
			continue
		}
		if best.Micros < 0 || c.Micros < best.Micros {
			best = c
		}
	}
	if best.Micros < 0 {
		return best, fmt.Errorf("lab: no usable measurement of %s's cost per answer: %w", protection, lastErr)
	}
	return best, nil
}

func answerCost(ctx context.Context, protection string, o backend.LeveeOptions, rate float64) (Cost, error) {
	res, err := loopback.Run(ctx, loopback.Config{
		Name: protection + " cost", Protection: protection, Client: loopback.Naive,
		Work: time.Microsecond, Timeout: time.Second, Retries: 0,
		Phases: []load.Phase{
			{Name: "idle", Rate: 0, Duration: costIdle},
			{Name: "warm", Rate: rate, Duration: costWarm},
			{Name: "measured", Rate: rate, Duration: costPhase},
			{Name: "tail", Rate: 0, Duration: costTail},
		},
		Drain: time.Second, Levee: o, TraceCPU: 50 * time.Millisecond,
	})
	if err != nil {
		return Cost{}, err
	}
	st := res.Load.Start
	idle, ok1 := res.CPU.Used(st.Add(100*time.Millisecond), st.Add(costIdle))
	ph := res.Load.Phases[2]
	from, to := st.Add(ph.Offset), st.Add(ph.Offset+ph.Duration)
	busy, ok2 := res.CPU.Used(from, to)
	s := res.Server.Series
	c := Cost{
		Rejected:  serverSum(s, s.Rejected, from, to),
		CPU:       busy,
		IdleShare: idle / (costIdle - 100*time.Millisecond).Seconds(),
	}
	c.Answered = c.Rejected + serverSum(s, s.OK, from, to) + serverSum(s, s.Other, from, to)
	if !ok1 || !ok2 {
		return c, fmt.Errorf("lab: the CPU trace does not cover the phase")
	}
	if c.Answered < 0.5*rate*costPhase.Seconds() {
		return c, fmt.Errorf("lab: the backend answered %.0f of %.0f requests", c.Answered, rate*costPhase.Seconds())
	}
	c.Micros = 1e6 * (busy - c.IdleShare*costPhase.Seconds()) / c.Answered
	return c, nil
}

// serverSum sums a backend series (buckets by completion time from
// s.Start) over [from, to).
func serverSum(s backend.Series, xs []int64, from, to time.Time) float64 {
	if s.Resolution <= 0 {
		return 0
	}
	var n int64
	for k := max(int(from.Sub(s.Start)/s.Resolution), 0); k < int(to.Sub(s.Start)/s.Resolution) && k < len(xs); k++ {
		n += xs[k]
	}
	return float64(n)
}
