package admit

import (
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

// retryShare measures the share of arrivals that are retries
// (levee.Call.Attempt ≥ 1), smoothed over retryTau, and decides with
// hysteresis whether overload rejections say "don't retry": above twice
// the default retry budget ratio retries are already amplifying the load,
// and a rejected caller's retry would only add to it.
type retryShare struct {
	prev    uint64  // retried count at the previous step
	retries float64 // retried arrivals per second, smoothed
	total   float64 // all arrivals per second, smoothed alike
	noRetry bool
}

// step closes a period of length dt in which the cumulative retried
// count reached retried and arrivals came at arrived per second. It
// returns the share and whether rejections say no-retry.
func (s *retryShare) step(retried uint64, arrived float64, dt time.Duration) (share float64, noRetry bool) {
	a := smooth.Alpha(dt, retryTau)
	s.retries = smooth.Toward(s.retries, float64(retried-s.prev)/dt.Seconds(), a)
	s.total = smooth.Toward(s.total, arrived, a)
	s.prev = retried
	if s.total > 0 {
		share = s.retries / s.total
	}
	switch {
	case share > noRetryOn:
		s.noRetry = true
	case share < noRetryOff:
		s.noRetry = false
	}
	return share, s.noRetry
}
