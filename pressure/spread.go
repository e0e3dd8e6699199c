package pressure

import (
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

// spread learns how variable the handler time is: its squared coefficient
// of variation, Var(d) ÷ E[d]², over the requests the concurrency signal
// sees end (d as DoneAt measures it: without the caller's own holds and
// the pauses between a client's attempts).
//
// A queue before the handlers waits longer the more variable the work
// is: in an M/G/c queue the mean wait is about (1 + cv²) ÷ 2 times what
// it is when service times are exponential (Pollaczek–Khinchine for one
// server, Allen–Cunneen for c), and the queue-delay signal's target is
// set for exponential ones. Lognormal handler times with cv 3 — one
// request in sixty over eight times the mean, as web requests that
// sometimes hit a cold cache are — put the 100 ms interval minimum of a
// one-core queue of 1 ms requests over a 100 ms target in 6 % of
// intervals at load 0.9 and 16 % at 0.95 (cv 6 on four cores of 5 ms:
// 18 % and 32 %), where exponential ones stay below it; each crossing
// is overload at once, and the simulator's levee shed up to 10 % of such
// a tier's requests at 0.8–0.95 of its capacity. The queue-delay signal
// multiplies its target by (1 + cv²) ÷ 2, never by less than 1 (a
// constant or exponential service keeps the target it had) nor more
// than spreadFactorMax (WithQueueSpread).
//
// Learned as the ratio of two EWMAs (of E[d] and E[d²], over
// spreadTau) taken from windows of at least spreadMinEnded requests
// (DoneAt adds d² to its end bucket as a float, by compare-and-swap: a
// sum of squared nanoseconds overflows at nine one-second requests),
// and not while the process is overloaded or sheds: overloaded latency
// is not the service's shape. A caller that makes its own requests slow
// raises cv² and so the queue target, never beyond spreadFactorMax
// times and within the target's ceiling and half the callers' median
// budget; the CPU and concurrency signals do not depend on it, and what
// it taught decays over spreadTau once the slow requests stop (2 % of
// the requests a hundred times slower for 5 s: the factor at 12.7, back
// under 1.1 within 45 s; TestSpreadFrozenAndHealing).
type spread struct {
	accN         int64
	accS1, accS2 float64
	accDt        time.Duration
	m1, m2       float64 // EWMAs of E[d], E[d²], seconds and seconds²
	learned      bool

	cv2 atomicFloat // the latest estimate; 0 until learned
}

// Spread parameters (see spread).
const (
	spreadTau       = 5 * time.Second
	spreadMinEnded  = 64
	spreadFactorMax = 16
)

// sample takes a period's (dt long) count of ended requests n and the
// sums of their handler times s1 and of its squares s2, in seconds, and,
// unless frozen, learns from them once they hold spreadMinEnded requests.
// A frozen period discards what had accumulated. Under the owner's lock.
func (s *spread) sample(n int64, s1, s2 float64, dt time.Duration, frozen bool) {
	if frozen {
		s.accN, s.accS1, s.accS2, s.accDt = 0, 0, 0, 0
		return
	}
	s.accN += n
	s.accS1 += s1
	s.accS2 += s2
	s.accDt += dt
	if s.accN < spreadMinEnded {
		return
	}
	e1, e2 := s.accS1/float64(s.accN), s.accS2/float64(s.accN)
	if !s.learned {
		s.m1, s.m2, s.learned = e1, e2, true
	} else {
		a := smooth.Alpha(s.accDt, spreadTau)
		s.m1 += a * (e1 - s.m1)
		s.m2 += a * (e2 - s.m2)
	}
	s.accN, s.accS1, s.accS2, s.accDt = 0, 0, 0, 0
	if s.m1 > 0 {
		s.cv2.store(max(0, s.m2/(s.m1*s.m1)-1))
	}
}

// spreadFactor is what the queue-delay target is multiplied by for a
// squared coefficient of variation cv2: (1 + cv2) ÷ 2 within [1,
// spreadFactorMax]; 1 for NaN or a negative reading.
func spreadFactor(cv2 float64) float64 {
	if !(cv2 > 1) {
		return 1
	}
	return min((1+cv2)/2, spreadFactorMax)
}
