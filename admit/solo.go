package admit

import (
	"math"
	"sync/atomic"
	"time"
)

// soloTime learns how long a request's service takes when it does not
// share the CPU: the service time of successful measured tickets that
// started while the server was not busy (signals below half their
// targets, nothing shed or degraded: the run queue off). Measured are the
// tickets measured for their route (one in 64) and, besides, one such
// ticket every soloEvery (Ticket.alone). While busy nothing is learned: a
// request then shares the CPU with the others, admitted or being
// rejected, and its time says how crowded the server is, not how long
// the work takes; the estimate from the last quiet spell stands.
//
// Why: the run queue's bound is the number of requests the server needs
// running at once. Little's law gives it as throughput × time in service,
// but only with the time a request takes alone: a CPU-bound handler that
// shares a core with nine others takes ten times as long, and a bound
// learned from how many run at once while busy (runbound.go) counts that
// sharing as need — twenty 20 ms requests admitted together on one core
// all finish 400 ms later. The capacity estimate × this time is the
// concurrency the capacity needs: about the number of cores for CPU-bound
// work, far more for work that waits on a dependency.
//
// One sample moves the estimate by a sixteenth of its distance, and a
// sample is first clamped to a quarter to four times the estimate, so a
// burst of slow (or fast) requests cannot move it far; the estimate only
// ever lowers the bound the running count gives (runBound.step), so a
// caller who makes its requests slow gains nothing. Lock-free: one CAS
// loop per measured ticket.
type soloTime struct {
	ns   atomic.Int64  // the estimate, ns; 0 while nothing is learned
	n    atomic.Uint64 // samples taken
	last atomic.Int64  // coarse clock of the last extra measurement (claim)
}

const (
	soloGain    = 1.0 / 16 // share of the distance to a sample
	soloClamp   = 4.0      // a sample counts as at most this factor from the estimate
	soloSamples = 8        // samples before the estimate is used
	soloEvery   = int64(5 * time.Millisecond)
)

// claim reports whether a ticket not measured for its route may be
// measured for the solo service time at coarse (the coarse clock): one
// every soloEvery at most.
func (s *soloTime) claim(coarse int64) bool {
	last := s.last.Load()
	return coarse-last >= soloEvery && s.last.CompareAndSwap(last, coarse)
}

// observe takes the service time d (ns) of a request that ran alone.
func (s *soloTime) observe(d int64) {
	if d < 0 || d > maxService {
		return
	}
	for {
		old := s.ns.Load()
		nv := float64(d)
		if old > 0 {
			o := float64(old)
			x := min(max(nv, o/soloClamp), o*soloClamp)
			nv = o + soloGain*(x-o)
		}
		if s.ns.CompareAndSwap(old, max(1, int64(math.Round(nv)))) {
			break
		}
	}
	s.n.Add(1)
}

// seconds returns the estimate in seconds, 0 before soloSamples samples.
func (s *soloTime) seconds() float64 {
	if s.n.Load() < soloSamples {
		return 0
	}
	return float64(s.ns.Load()) / 1e9
}
