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
// What is learned is the median of those times, tracked in the log
// domain: each sample moves the estimate 5% towards it and no further,
// so a minority of samples taken while the server was crowded after all
// (a request still running from a busy spell) cannot pull it, nor can a
// caller who makes its requests slow; and the estimate only ever lowers
// the bound the running count gives (runBound.step), so a slow caller
// gains nothing. Lock-free: one CAS loop per measured ticket.
type soloTime struct {
	ns   atomic.Int64  // the estimate, ns; 0 while nothing is learned
	n    atomic.Uint64 // samples taken
	last atomic.Int64  // coarse clock of the last extra measurement (claim)
}

const (
	soloStep    = 0.05 // per sample, in the log domain: ×e^±0.05
	soloSamples = 8    // samples before the estimate is used
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
		nv := max(1, d)
		switch {
		case old == 0:
		case d > old:
			nv = min(nv, int64(math.Ceil(float64(old)*soloUp)))
		case d < old:
			nv = max(nv, int64(float64(old)*soloDown))
		default:
			nv = old
		}
		if s.ns.CompareAndSwap(old, nv) {
			break
		}
	}
	s.n.Add(1)
}

// The median tracker's factors.
var (
	soloUp   = math.Exp(soloStep)
	soloDown = math.Exp(-soloStep)
)

// seconds returns the estimate in seconds, 0 before soloSamples samples.
func (s *soloTime) seconds() float64 {
	if s.n.Load() < soloSamples {
		return 0
	}
	return float64(s.ns.Load()) / 1e9
}
