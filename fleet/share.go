package fleet

import "math"

// target is the lease, in cores, that an instance asks for a tenant with
// fleet quota q when it wants w cores and the fleet (this instance
// included) wants sumW, spread over n instances:
//
//	sumW ≤ q: w·(q − r)/sumW, r = (q − sumW)/(n+1)
//	          what it wants scaled up to share the quota, less a reserve r
//	          kept free for an instance the tenant has not reached yet; the
//	          headroom is in proportion to each instance's demand, so that a
//	          busy instance's noise does not make it refuse a tenant under
//	          its quota
//	sumW > q: q·w/sumW
//	          the same fraction of every instance's demand (the fleet's
//	          usage is then q)
//
// An instance that wants nothing asks for the reserve r (nothing when the
// fleet wants more than q), so that its first requests are served. The
// store then
// grants min(target, q − the leases the others hold), so the leases never
// sum above q (see grant).
func target(q, w, sumW float64, n int) float64 {
	w = math.Max(w, 0)
	sumW = math.Max(sumW, w)
	n = max(n, 1)
	if sumW <= q {
		r := (q - sumW) / float64(n+1)
		if w == 0 {
			return r
		}
		return w * (q - r) / sumW
	}
	return q * w / sumW
}

// grant is what a store hands an instance that asks for target with quota
// q while the other instances hold othersHas: never more than is free, so
// that the leases never sum above the quota. Every Store implements this
// rule (the Redis script in module fleet/fleetredis as well).
func grant(q, target, othersHas int64) int64 {
	return max(0, min(target, q-othersHas))
}

// Rates travel to and from the store as integers of 1e-6 core
// (micro-cores), so that the fleet's sums are exact wherever they are
// kept.
const micro = 1e6

// ToMicro converts cores to micro-cores, rounding; negative and NaN give
// 0, and values are capped at MaxCores.
func ToMicro(cores float64) int64 {
	if !(cores > 0) {
		return 0
	}
	return int64(math.Round(math.Min(cores, MaxCores) * micro))
}

// FromMicro converts micro-cores to cores.
func FromMicro(m int64) float64 { return float64(m) / micro }
