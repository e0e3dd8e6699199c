package proxy

import (
	"math"
	"sort"
	"time"
)

// ejectCause says why a backend is out of rotation.
type ejectCause uint8

const (
	causeNone    ejectCause = iota
	causeHealth             // active checks failed Unhealthy times in a row
	causeOutlier            // ConsecutiveFailures proxied attempts failed
)

var causeNames = [...]string{"", "health", "outlier"}

func (c ejectCause) String() string { return causeNames[c] }

// rotation is a backend's place in rotation, owned by the control loop.
type rotation struct {
	ejected   bool
	cause     ejectCause
	until     time.Time // earliest return
	ejections int       // consecutive ejections, for the doubling
	back      time.Time // entered rotation; slow start counts from here (zero: none)
	capped    bool      // should be out, but the cap keeps it in
	cold      bool      // refused a connection: restarting; ramp it when it answers
	draining  bool      // removed from the set; finishing its requests
}

// rotationParams are what the rotation rules read.
type rotationParams struct {
	healthOn            bool
	unhealthy, healthy  int
	consecutive         int
	baseEject, maxEject time.Duration
	maxShare            float64
	slowWindow          time.Duration // slow start; 0: none
	slowFloor           float64
}

// wantsOut says whether b should leave rotation, and why: active checks
// failed in a row, or proxied attempts did. Overload (503, timeouts,
// checks answered "overloaded") is never a reason.
func wantsOut(b *backend, p *rotationParams) ejectCause {
	if p.healthOn && int(b.health.failRun.Load()) >= p.unhealthy {
		return causeHealth
	}
	if p.consecutive > 0 && int(b.consec.Load()) >= p.consecutive {
		return causeOutlier
	}
	return causeNone
}

// mayReturn says whether an ejected b may come back at now: its ejection
// has run its time and, with active checks, they pass again.
func mayReturn(b *backend, p *rotationParams, now time.Time) bool {
	if now.Before(b.rot.until) {
		return false
	}
	if !p.healthOn {
		return true
	}
	return checkResult(b.health.last.Load()) != checkFailed && int(b.health.okRun.Load()) >= p.healthy
}

// ejectionFor returns the duration of the (n+1)-th consecutive ejection:
// base doubled n times, at most max.
func ejectionFor(n int, base, maxEject time.Duration) time.Duration {
	d := base
	for i := 0; i < n && d < maxEject; i++ {
		d *= 2
	}
	return min(d, maxEject)
}

// maxEjected is the cap: ⌊share × backends⌋.
func maxEjected(n int, share float64) int {
	return int(math.Floor(share*float64(n) + 1e-9))
}

// rotate is the rotation stage of the control loop: ejected backends whose
// time is up come back (ramped from now), then backends that should leave
// are ejected while the cap allows, the strongest evidence first (failed
// checks, then the most consecutive failures, then the address, so the
// choice is deterministic); the rest stay in, capped. It returns the
// changes, for the log.
func rotate(set []*backend, p *rotationParams, now time.Time) (changes []rotationChange) {
	out := 0
	for _, b := range set {
		r := &b.rot
		if r.ejected && mayReturn(b, p, now) {
			r.ejected, r.cause, r.back, r.cold = false, causeNone, now, false
			b.lim.reset()
			b.consec.Store(0)
			changes = append(changes, rotationChange{b: b, returned: true})
		}
		if r.ejected {
			out++
		}
		if !r.ejected && r.ejections > 0 && !r.back.IsZero() && now.Sub(r.back) >= p.maxEject {
			r.ejections = 0 // in rotation for a long while: forget
		}
	}
	type cand struct {
		b     *backend
		cause ejectCause
	}
	var cands []cand
	for _, b := range set {
		b.rot.capped = false
		if b.rot.ejected {
			continue
		}
		if c := wantsOut(b, p); c != causeNone {
			cands = append(cands, cand{b, c})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.cause != b.cause {
			return a.cause == causeHealth
		}
		if ca, cb := a.b.consec.Load(), b.b.consec.Load(); ca != cb {
			return ca > cb
		}
		return a.b.addr < b.b.addr
	})
	limit := maxEjected(len(set), p.maxShare)
	for _, c := range cands {
		r := &c.b.rot
		if out >= limit {
			r.capped = true
			continue
		}
		d := ejectionFor(r.ejections, p.baseEject, p.maxEject)
		r.ejected, r.cause, r.until, r.capped = true, c.cause, now.Add(d), false
		r.ejections++
		out++
		changes = append(changes, rotationChange{b: c.b, cause: c.cause, for_: d})
	}
	return changes
}

// rotationChange is one backend leaving or entering rotation.
type rotationChange struct {
	b        *backend
	returned bool
	cause    ejectCause
	for_     time.Duration
}

// slowStartWeight is the share of its limit a backend back in rotation
// since back may use at now: from floor up to 1, linearly over window.
func slowStartWeight(now, back time.Time, window time.Duration, floor float64) float64 {
	if window <= 0 || back.IsZero() {
		return 1
	}
	el := now.Sub(back)
	if el >= window {
		return 1
	}
	if el < 0 {
		el = 0
	}
	return floor + (1-floor)*float64(el)/float64(window)
}
