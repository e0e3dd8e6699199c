package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loopback"
)

// Cost is one measurement of the server CPU per answer.
type Cost = loopback.Cost

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
	c, err := loopback.Cheapest(rounds, func() (Cost, error) { return answerCost(ctx, protection, o, rate) })
	if err != nil {
		return Cost{}, fmt.Errorf("lab: no usable measurement of %s's cost per answer: %w", protection, err)
	}
	return c[0], nil
}

func answerCost(ctx context.Context, protection string, o backend.LeveeOptions, rate float64) (Cost, error) {
	res, err := loopback.Run(ctx, loopback.Config{
		Name: protection + " cost", Protection: protection, Client: loopback.Naive,
		Work: time.Microsecond, Timeout: time.Second, Retries: 0,
		Phases: loopback.CostPhases(rate),
		Drain:  time.Second, Levee: o, TraceCPU: 50 * time.Millisecond,
	})
	if err != nil {
		return Cost{}, err
	}
	return loopback.CostOf(res.Load, res.CPU, res.Server.Series, rate)
}
