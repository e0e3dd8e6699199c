package admit

import "time"

// episodes learns how long overload episodes last and turns it into the
// Retry-After advice of overload rejections: a caller told to come back
// after a typical episode's length finds the server recovered, one told
// less comes back into the overload.
type episodes struct {
	recovery time.Duration // smoothed episode length
	n        int           // episodes observed
}

func newEpisodes() episodes { return episodes{recovery: defaultRecovery} }

// episodeIn is one period's input: the law's output and the episode's
// start.
type episodeIn struct {
	now      int64 // ns
	shedding bool  // the law is shedding after this period
	epStart  int64 // ns: the current (or last) episode's start
	ended    bool  // an episode ended this period ...
	epLen    time.Duration
	period   time.Duration // ... its length is epLen plus one period
}

// step records an ended episode and returns the Retry-After advice for
// Sheddable overload rejections: the typical episode length, or the
// current episode's length so far if longer, within [minRetryAfter,
// maxRetryAfter].
func (e *episodes) step(in episodeIn) time.Duration {
	if in.ended {
		d := in.epLen + in.period
		if e.n == 0 {
			e.recovery = d
		} else {
			e.recovery = (e.recovery + d) / 2
		}
		e.n++
	}
	ra := e.recovery
	if in.shedding {
		ra = max(ra, time.Duration(in.now-in.epStart))
	}
	return min(max(ra, minRetryAfter), maxRetryAfter)
}
