package admit

import (
	"sync/atomic"
	"time"
)

// routeSlots bounds the number of routes whose service time is learned.
// Routes beyond it are admitted without the service-time check.
const routeSlots = 64

// routeTable learns the service time of each route: an exponentially
// weighted mean of sampled successful durations (weight 1/8 per sample).
// Lookups and updates are lock-free; a slot is claimed by CAS on its key.
type routeTable struct {
	slots [routeSlots]routeSlot
}

type routeSlot struct {
	key  atomic.Uint64 // route hash | 1 (0 = empty)
	mean atomic.Int64  // nanoseconds
	n    atomic.Uint64 // samples
	_    [40]byte
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

// serviceTime returns the learned service time of the route, 0 if unknown.
func (t *routeTable) serviceTime(key uint64) int64 {
	if s := t.find(key); s != nil && s.n.Load() >= minRouteSamples {
		return s.mean.Load()
	}
	return 0
}

// minRouteSamples is how many samples a route needs before its service time
// is trusted for deadline rejections.
const minRouteSamples = 4

// observe records one successful duration of the route, claiming a slot if
// the route is new and there is room.
func (t *routeTable) observe(key uint64, d int64) {
	if d <= 0 || d > int64(time.Hour) {
		return
	}
	key |= 1
	s := t.find(key)
	if s == nil {
		i := key >> 58
		for p := uint64(0); p < 4 && s == nil; p++ {
			c := &t.slots[(i+p)&(routeSlots-1)]
			if c.key.CompareAndSwap(0, key) || c.key.Load() == key {
				s = c
			}
		}
		if s == nil {
			return
		}
	}
	n := s.n.Add(1)
	old := s.mean.Load()
	if n == 1 || old == 0 {
		s.mean.Store(d)
		return
	}
	// Racing updates may lose a sample; the mean stays a mean.
	s.mean.Store(old + (d-old)/8)
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
