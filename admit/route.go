package admit

import (
	"math"
	"sync/atomic"
	"time"
)

// Service times, and the rule for refusing a request whose deadline
// cannot be met.
//
// A route's service time is learned from successful tickets only, from
// the start of service (Admit, or the end of Ticket.Wait, or the adapter's
// Ticket.Start once the request body is read) to Done; tickets marked with
// Ticket.Exclude (streams, long-polls, hijacked connections) teach
// nothing. One ticket in 64 is measured, and every probe (below).
//
// What is learned is a low quantile (the 10th percentile) of those times,
// tracked in the log domain: a sample above the estimate raises it by 2%
// at most, one below lowers it by at most 17%, and never past the sample
// itself. One sample, or a burst of slow ones, cannot move it far (a
// hundred samples raise it ×7 at most); a route that got faster is
// followed at 17% a sample (3 s to 1 ms in 45 samples).
//
// A request is refused as Deadline ("cannot meet") only on strong
// evidence: its time left is below that 10th percentile, the estimate
// rests on at least minEvidence samples (counted with a 10 s half-life),
// and the last of them is less than routeStale old. Evidence that is not
// renewed lapses, so a route whose requests are all refused is tried
// again; and one refused request in probeEvery is admitted anyway, as a
// probe that is always measured, so that a wrong estimate heals in a few
// seconds even while requests keep coming.
const (
	routeQuantile = 0.1
	routeGain     = 0.2                     // step of the log-domain quantile tracker
	minEvidence   = 16                      // samples before the estimate refuses anything
	evidenceHalf  = 10 * time.Second        // half-life of the evidence count
	routeStale    = 5 * time.Second         // evidence older than this does not refuse
	routeEvict    = time.Minute             // a route silent this long gives its slot up
	probeEvery    = 16                      // one refused request in this many is a probe
	maxService    = int64(10 * time.Minute) // longer samples are not service times
)

// Per-sample factors of the quantile tracker: up by routeGain·q, down by
// routeGain·(1−q), in the log domain.
var (
	routeUp   = math.Exp(routeGain * routeQuantile)
	routeDown = math.Exp(-routeGain * (1 - routeQuantile))
)

// routeSlots bounds the number of routes whose service time is learned.
// A new route takes a free slot, or one silent for routeEvict; when none
// is free it is admitted without the service-time check.
const routeSlots = 64

// routeTable learns the service time of each route. Lookups are
// lock-free; an update takes the slot's spin lock (one ticket in 64
// updates).
type routeTable struct {
	slots [routeSlots]routeSlot
}

type routeSlot struct {
	key  atomic.Uint64 // route hash | 1 (0 = empty)
	est  atomic.Int64  // ns: the low quantile
	ev   atomic.Uint64 // float64 bits: evidence (decayed sample count)
	at   atomic.Int64  // the controller's scale: last sample
	lock atomic.Bool
	_    [24]byte
}

func (t *routeTable) find(key uint64) *routeSlot {
	key |= 1
	i := key >> 58 // top 6 bits: 0..63
	for p := uint64(0); p < 4; p++ {
		s := &t.slots[(i+p)&(routeSlots-1)]
		if s.key.Load() == key {
			return s
		}
	}
	return nil
}

// cannotMeet reports whether a request of the route with left ns left at
// now cannot be served in time, on strong evidence (see above).
func (t *routeTable) cannotMeet(key uint64, left, now int64) bool {
	s := t.find(key)
	if s == nil || left >= s.est.Load() {
		return false
	}
	return math.Float64frombits(s.ev.Load()) >= minEvidence && now-s.at.Load() < int64(routeStale)
}

// serviceTime returns the route's learned low quantile in ns, and whether
// it is backed by strong evidence at now.
func (t *routeTable) serviceTime(key uint64, now int64) (int64, bool) {
	s := t.find(key)
	if s == nil {
		return 0, false
	}
	return s.est.Load(), math.Float64frombits(s.ev.Load()) >= minEvidence && now-s.at.Load() < int64(routeStale)
}

// observe records one successful service time d of the route, measured at
// now, claiming a slot if the route is new.
func (t *routeTable) observe(key uint64, d, now int64) {
	if d <= 0 || d > maxService {
		return
	}
	key |= 1
	s := t.find(key)
	if s == nil {
		if s = t.claim(key, now); s == nil {
			return
		}
	}
	if !s.lock.CompareAndSwap(false, true) {
		return // another update is running: losing one sample is fine
	}
	defer s.lock.Store(false)
	ev := math.Float64frombits(s.ev.Load())
	if ev == 0 {
		s.est.Store(d)
	} else {
		est := float64(s.est.Load())
		if x := float64(d); x > est {
			est = min(est*routeUp, x)
		} else {
			est = max(est*routeDown, x)
		}
		s.est.Store(int64(est))
		ev *= math.Exp2(-float64(now-s.at.Load()) / float64(evidenceHalf))
	}
	s.ev.Store(math.Float64bits(min(ev, 1e6) + 1))
	s.at.Store(now)
}

// claim takes a free slot for key, or one whose route has been silent for
// routeEvict.
func (t *routeTable) claim(key uint64, now int64) *routeSlot {
	i := key >> 58
	for p := uint64(0); p < 4; p++ {
		c := &t.slots[(i+p)&(routeSlots-1)]
		old := c.key.Load()
		if old == key {
			return c
		}
		if old != 0 && now-c.at.Load() < int64(routeEvict) {
			continue
		}
		if !c.lock.CompareAndSwap(false, true) {
			continue
		}
		if c.key.CompareAndSwap(old, key) {
			c.ev.Store(0) // the first sample sets the estimate
			c.at.Store(now)
			c.lock.Store(false)
			return c
		}
		c.lock.Store(false)
	}
	return nil
}

// routes returns the number of routes learned.
func (t *routeTable) routes() int {
	n := 0
	for i := range t.slots {
		if t.slots[i].key.Load() != 0 {
			n++
		}
	}
	return n
}
