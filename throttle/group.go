package throttle

import (
	"hash/fnv"
	"sync"
	"sync/atomic"
)

// Group keeps one Throttle per backend key (host, service, shard), created
// on first use with the Group's options. It holds at most WithMaxKeys
// throttles (default 1024): adding one more drops the one idle longest
// (callers still holding it keep a working, unlisted Throttle). Get is
// lock-free and allocation-free for known keys. Each key's random decisions
// are seeded with the Group seed mixed with a hash of the key. Safe for
// concurrent use.
type Group struct {
	cfg config
	m   atomic.Pointer[map[string]*Throttle]
	mu  sync.Mutex
}

// NewGroup returns an empty Group whose throttles use opts. It panics on
// an option value out of its documented range, as New does.
func NewGroup(opts ...Option) *Group {
	g := &Group{cfg: newConfig(opts)}
	m := map[string]*Throttle{}
	g.m.Store(&m)
	return g
}

// Get returns the Throttle for key, creating it if needed.
func (g *Group) Get(key string) *Throttle {
	if t, ok := (*g.m.Load())[key]; ok {
		return t
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	old := *g.m.Load()
	if t, ok := old[key]; ok {
		return t
	}
	victim := ""
	if len(old) >= g.cfg.maxKeys {
		oldest := int64(0)
		first := true
		for k, t := range old {
			n := t.next.Load()
			if first || n < oldest || (n == oldest && k < victim) {
				victim, oldest, first = k, n, false
			}
		}
	}
	m := make(map[string]*Throttle, len(old)+1)
	for k, t := range old {
		if k != victim || len(old) < g.cfg.maxKeys {
			m[k] = t
		}
	}
	c := g.cfg
	h := fnv.New64a()
	h.Write([]byte(key))
	c.seed ^= h.Sum64()
	t := newThrottle(c)
	m[key] = t
	g.m.Store(&m)
	return t
}

// Len returns the number of throttles the Group holds.
func (g *Group) Len() int { return len(*g.m.Load()) }
