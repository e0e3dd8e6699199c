package grpclab

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
)

// AnswerCost measures the backend CPU one gRPC answer costs, as the HTTP
// lab's AnswerCost does for net/http (package tools/loopback/lab): a
// backend with the given protection, doing 1 µs of work per call and, if
// refuse is set, forced to refuse every call (levee only), is offered
// rate calls a second by a client that never retries, while this process
// reads the backend's CPU time from /proc every 50 ms; the CPU over the
// measured phase, less the idle CPU, is divided by the calls it answered.
// Noise from other processes only adds CPU, so the lowest of rounds
// measurements is kept.
func AnswerCost(ctx context.Context, protection string, refuse bool, rate float64, rounds int) (loopback.Cost, error) {
	if refuse && protection != backend.Levee {
		return loopback.Cost{}, fmt.Errorf("grpclab: only levee can be forced to refuse")
	}
	c, err := loopback.Cheapest(rounds, func() (loopback.Cost, error) { return answerCost(ctx, protection, refuse, rate) })
	if err != nil {
		return loopback.Cost{}, fmt.Errorf("grpclab: no usable measurement of %s's cost per answer: %w", protection, err)
	}
	return c[0], nil
}

func answerCost(ctx context.Context, protection string, refuse bool, rate float64) (loopback.Cost, error) {
	phases := loopback.CostPhases(rate)
	var total time.Duration
	for _, p := range phases {
		total += p.Duration
	}
	b, err := startBackend(ctx, backendConfig{Protection: protection, Work: time.Microsecond,
		Limit: total + time.Minute, ForceShed: refuse})
	if err != nil {
		return loopback.Cost{}, err
	}
	if cpu := loopback.Place().Loadgen; cpu >= 0 {
		if err := loopback.PinSelf(cpu); err != nil {
			b.kill()
			return loopback.Cost{}, err
		}
	}
	cc, err := Dial(b.Addr)
	if err != nil {
		b.kill()
		return loopback.Cost{}, err
	}
	defer cc.Close()
	tctx, stop := context.WithCancel(ctx)
	trace, traced := loopback.TraceCPU(tctx, b.cmd.Process.Pid, 50*time.Millisecond)
	lr, lerr := load.Run(ctx, load.Config{
		Phases: phases,
		Do:     Naive(cc, time.Second, 0),
		Drain:  time.Second,
		Limits: load.Limits{MaxRate: load.CeilingRate, MaxDuration: load.CeilingDuration},
	})
	stop()
	<-traced
	rep, serr := b.Stop()
	if err := errors.Join(lerr, serr); err != nil {
		return loopback.Cost{}, fmt.Errorf("grpclab: cost run: %w", err)
	}
	return loopback.CostOf(lr, trace, rep.Series, rate)
}
