package throttle

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
)

// Group keeps one Throttle per backend key (host, service, shard), created
// on first use with the Group's options. It holds at most WithMaxKeys
// throttles (default 1024): adding one more drops one that has been idle
// long (the idlest of a few, taken in turn; callers still holding it keep a
// working, unlisted Throttle).
//
// Get for a known key is lock-free and allocation-free: one hash of the key
// and a look at its bucket. A new key takes a mutex and copies only its own
// bucket (a few entries), never the whole table, so a stream of new keys
// (a crawler, a webhook per customer host) costs O(1) each, also in a full
// Group. Each key's random decisions are seeded with the Group seed mixed
// with a hash of the key. Safe for concurrent use.
type Group struct {
	cfg     config
	seed    maphash.Seed
	buckets []atomic.Pointer[groupEntry] // heads of immutable lists; len a power of two
	mask    uint64

	mu    sync.Mutex    // held to add or drop a key
	all   []*groupEntry // every listed entry, for eviction; under mu
	hand  int           // eviction cursor into all; under mu
	count atomic.Int64
}

// groupEntry is a node of a bucket's list. Once published it is never
// modified: removing a node copies the nodes before it.
type groupEntry struct {
	key  string
	hash uint64
	t    *Throttle
	next *groupEntry
	at   int // index in Group.all
}

// evictSample is how many entries a full Group looks at, in turn, to find
// the one to drop.
const evictSample = 8

// NewGroup returns an empty Group whose throttles use opts. It panics on
// an option value out of its documented range, as New does.
func NewGroup(opts ...Option) *Group {
	g := &Group{cfg: newConfig(opts), seed: maphash.MakeSeed()}
	n := 1
	for n < g.cfg.maxKeys {
		n *= 2
	}
	g.buckets = make([]atomic.Pointer[groupEntry], n)
	g.mask = uint64(n - 1)
	g.all = make([]*groupEntry, 0, g.cfg.maxKeys)
	return g
}

// Get returns the Throttle for key, creating it if needed.
func (g *Group) Get(key string) *Throttle {
	h := maphash.String(g.seed, key)
	b := &g.buckets[h&g.mask]
	if t := lookup(b.Load(), key, h); t != nil {
		return t
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := lookup(b.Load(), key, h); t != nil {
		return t
	}
	e := &groupEntry{key: key, hash: h}
	if len(g.all) >= g.cfg.maxKeys {
		victim := g.victim()
		g.remove(victim)
		e.at = victim.at
		g.all[e.at] = e
	} else {
		e.at = len(g.all)
		g.all = append(g.all, e)
		g.count.Add(1)
	}
	c := g.cfg
	c.seed ^= keySeed(key)
	e.t = newThrottle(c)
	e.next = b.Load()
	b.Store(e)
	return e.t
}

func lookup(e *groupEntry, key string, h uint64) *Throttle {
	for ; e != nil; e = e.next {
		if e.hash == h && e.key == key {
			return e.t
		}
	}
	return nil
}

// victim returns the idlest of the next evictSample entries from the hand,
// which moves on: every entry is looked at in turn, and one never used
// since it was added (next fold due at the start of time) goes first.
func (g *Group) victim() *groupEntry {
	var v *groupEntry
	for range min(evictSample, len(g.all)) {
		e := g.all[g.hand]
		g.hand = (g.hand + 1) % len(g.all)
		if v == nil || e.t.next.Load() < v.t.next.Load() {
			v = e
		}
	}
	return v
}

// remove unlists e: its bucket's list is rebuilt with copies of the nodes
// before it (readers walking the old list still see a whole list).
func (g *Group) remove(e *groupEntry) {
	b := &g.buckets[e.hash&g.mask]
	var prefix []*groupEntry
	for x := b.Load(); x != e; x = x.next {
		prefix = append(prefix, x)
	}
	rest := e.next
	for i := len(prefix) - 1; i >= 0; i-- {
		c := *prefix[i]
		c.next = rest
		g.all[c.at] = &c
		rest = &c
	}
	b.Store(rest)
}

// keySeed is the FNV-1a hash of key: stable across processes, so that a
// Group's decisions for a key depend on its seed and the key only.
func keySeed(key string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	return h
}

// Len returns the number of throttles the Group holds.
func (g *Group) Len() int { return int(g.count.Load()) }
