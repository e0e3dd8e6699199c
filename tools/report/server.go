package report

import "math"

// ServerRecoveryAfter is the seconds from the end of the phase named
// trigger until the run's servers, all instances together, answer
// successfully (in time) at least RecoveryShare of the next phase's
// offered load in each whole second of a stretch of holdS seconds,
// looking within that next phase only; the stretch is shortened to what
// the phase leaves after its first second, and is at least a second. ok is
// false if that never happens, or there is no next phase or no instance
// series. Unlike Recovery, which a client sees, this is the server's side:
// clients that throttle themselves may still be sending less.
func (r *Run) ServerRecoveryAfter(trigger string, holdS float64) (seconds float64, ok bool) {
	next, served, _, ok := r.afterTrigger(trigger)
	if !ok {
		return 0, false
	}
	hold := shortenHold(holdS, next)
	return Sustained(served, r.Series.BucketS, next.StartS, hold, RecoveryShare*next.OfferedRPS)
}

// ServerHealthyAfter is the seconds from the end of the phase named
// trigger until the run's servers, for a stretch of holdS seconds
// (shortened as in ServerRecoveryAfter), answer successfully in time at
// least RecoveryShare of the requests that reach them in each second,
// whatever their number: a client that throttles itself sends less than
// the offered load, and ServerRecoveryAfter would blame the server for it.
func (r *Run) ServerHealthyAfter(trigger string, holdS float64) (seconds float64, ok bool) {
	next, served, received, ok := r.afterTrigger(trigger)
	if !ok {
		return 0, false
	}
	hold := shortenHold(holdS, next)
	return SustainedShare(served, received, r.Series.BucketS, next.StartS, hold, RecoveryShare)
}

// afterTrigger returns the phase after trigger and the servers' served
// and received rates summed over instances, cut at that phase's end.
func (r *Run) afterTrigger(trigger string) (next Phase, served, received []float64, ok bool) {
	i := -1
	for k, p := range r.Phases {
		if p.Name == trigger {
			i = k
		}
	}
	if i < 0 || i+1 >= len(r.Phases) || len(r.Series.Instances) == 0 || !(r.Series.BucketS > 0) {
		return Phase{}, nil, nil, false
	}
	next = r.Phases[i+1]
	end := bucketAt(next.EndS, r.Series.BucketS)
	served, received = make([]float64, end), make([]float64, end)
	for _, in := range r.Series.Instances {
		for b := 0; b < end; b++ {
			if b < len(in.ServedRPS) {
				served[b] += in.ServedRPS[b]
			}
			if b < len(in.ReceivedRPS) {
				received[b] += in.ReceivedRPS[b]
			}
		}
	}
	return next, served, received, true
}

// shortenHold keeps a stretch of hold seconds within what phase p leaves
// after its first second, and at least a second.
func shortenHold(hold float64, p Phase) float64 {
	left := math.Floor(p.EndS-p.StartS) - 1
	return max(1, min(hold, left))
}
