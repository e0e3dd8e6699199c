package throttle

import "sort"

// Range calls f for each Throttle the Group holds, in key order, until f
// returns false. It sees the Group as of the call (a Throttle added or
// dropped meanwhile may be missed) and allocates; it is meant for metrics
// collection, not for the request path.
func (g *Group) Range(f func(key string, t *Throttle) bool) {
	m := *g.m.Load()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !f(k, m[k]) {
			return
		}
	}
}
