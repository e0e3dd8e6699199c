package throttle

import "sort"

// Range calls f for each Throttle the Group holds, in key order, until f
// returns false. It sees the Group as of the call (a Throttle added or
// dropped meanwhile may be missed) and allocates; it is meant for metrics
// collection, not for the request path.
func (g *Group) Range(f func(key string, t *Throttle) bool) {
	var all []*groupEntry
	for i := range g.buckets {
		for e := g.buckets[i].Load(); e != nil; e = e.next {
			all = append(all, e)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].key < all[j].key })
	for _, e := range all {
		if !f(e.key, e.t) {
			return
		}
	}
}
