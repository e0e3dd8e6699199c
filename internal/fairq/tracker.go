package fairq

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

// NumClasses is the number of request classes (criticalities) a sample can
// carry in its low two bits.
const NumClasses = 4

// Key returns the tenant part of a sample or hash: the hash with its two low
// bits cleared.
func Key(h uint64) uint64 { return h &^ (NumClasses - 1) }

// Sample packs a tenant hash and a class (0..3) into one word for a Ring.
func Sample(h uint64, class int) uint64 { return Key(h) | uint64(class&(NumClasses-1)) }

// Tenant is one heavy-hitter entry.
type Tenant struct {
	// Key identifies the tenant (Key of its hash).
	Key uint64
	// Rate is the smoothed arrival rate in requests per second, per class.
	Rate [NumClasses]float64
	// count is the decayed sampled weight that ranks entries for eviction.
	count float64
	// period accumulates this period's weight per class.
	period [NumClasses]float64
	fresh  bool
}

// Total returns the tenant's rate summed over classes.
func (t *Tenant) Total() float64 { return t.Rate[0] + t.Rate[1] + t.Rate[2] + t.Rate[3] }

const (
	hllBits = 12
	hllRegs = 1 << hllBits
	// rateJump and jumpMin: a tenant's rate that changes by this factor
	// within one period, with at least jumpMin requests in the period, is
	// taken at once instead of smoothed.
	rateJump = 2.0
	jumpMin  = 32
	// DefaultK is the default number of heavy-hitter entries.
	DefaultK = 256
	// maxReplacements bounds the work of one Step when many new tenants
	// arrive at once (e.g. an attacker rotating ids).
	maxReplacements = 256
)

// Tracker keeps the heavy hitters and the number of active tenants. It is
// used by one goroutine (the control loop) and is not safe for concurrent
// use. Memory is bounded by K entries plus one period's distinct samples
// (at most RingSize).
type Tracker struct {
	k       int
	all     Tenant // every sample, whatever its tenant
	entries []Tenant
	index   map[uint64]int32
	batch   map[uint64]int32
	items   []batchItem

	hll      [2][hllRegs]uint8
	gen      int
	genStart time.Time
	genLen   time.Duration
	rateTau  time.Duration
	countTau time.Duration
}

type batchItem struct {
	key uint64
	w   [NumClasses]float64
	tot float64
}

// NewTracker returns a Tracker with at most k heavy-hitter entries (k ≤ 0
// means DefaultK). Rates are smoothed with a 0.5 s time constant, eviction
// counts decay with 5 s, and active tenants are counted over the last
// 5–10 s.
func NewTracker(k int) *Tracker {
	if k <= 0 {
		k = DefaultK
	}
	return &Tracker{
		k:        k,
		all:      Tenant{fresh: true},
		entries:  make([]Tenant, 0, k),
		index:    make(map[uint64]int32, k),
		batch:    make(map[uint64]int32, 256),
		genLen:   5 * time.Second,
		rateTau:  500 * time.Millisecond,
		countTau: 5 * time.Second,
	}
}

// Add records one sample (as built by Sample) of the current period with
// the given weight (the sampling ratio: a sample stands for weight
// requests).
func (t *Tracker) Add(sample uint64, weight float64) {
	key, class := Key(sample), int(sample&(NumClasses-1))
	// HyperLogLog: register from the top bits, rank from the rest.
	reg := key >> (64 - hllBits)
	rho := uint8(bits.LeadingZeros64(key<<hllBits|1<<(hllBits-1))) + 1
	if rho > t.hll[t.gen][reg] {
		t.hll[t.gen][reg] = rho
	}
	i, ok := t.batch[key]
	if !ok {
		i = int32(len(t.items))
		t.batch[key] = i
		t.items = append(t.items, batchItem{key: key})
	}
	t.items[i].w[class] += weight
	t.items[i].tot += weight
	t.all.period[class] += weight
}

// Step closes the period of length dt ending at now: merges the period's
// samples into the heavy-hitter table and updates the smoothed rates.
func (t *Tracker) Step(now time.Time, dt time.Duration) {
	if dt <= 0 {
		dt = time.Millisecond
	}
	sec := dt.Seconds()
	if t.genStart.IsZero() {
		t.genStart = now
	}
	if now.Sub(t.genStart) >= t.genLen {
		t.gen ^= 1
		t.hll[t.gen] = [hllRegs]uint8{}
		t.genStart = now
	}
	// Heaviest first, ties by key: deterministic whatever the map order.
	slices.SortFunc(t.items, func(a, b batchItem) int { return heavierFirst(a.tot, b.tot, a.key, b.key) })
	decay := smooth.Decay(dt, t.countTau)
	for i := range t.entries {
		t.entries[i].count *= decay
	}
	replaced := 0
	for _, it := range t.items {
		if j, ok := t.index[it.key]; ok {
			e := &t.entries[j]
			e.count += it.tot
			for c := range e.period {
				e.period[c] += it.w[c]
			}
			continue
		}
		if len(t.entries) < t.k {
			t.index[it.key] = int32(len(t.entries))
			t.entries = append(t.entries, Tenant{Key: it.key, count: it.tot, period: it.w, fresh: true})
			continue
		}
		if replaced >= maxReplacements {
			continue
		}
		// Space-Saving: the newcomer takes the place of the smallest entry
		// and inherits its count as an upper bound of what it missed.
		m := 0
		for j := 1; j < len(t.entries); j++ {
			a, b := &t.entries[j], &t.entries[m]
			if a.count < b.count || (a.count == b.count && a.Key < b.Key) {
				m = j
			}
		}
		delete(t.index, t.entries[m].Key)
		t.index[it.key] = int32(m)
		t.entries[m] = Tenant{Key: it.key, count: t.entries[m].count + it.tot, period: it.w, fresh: true}
		replaced++
	}
	alpha := smooth.Alpha(dt, t.rateTau)
	for i := range t.entries {
		t.entries[i].smooth(sec, alpha)
	}
	t.all.smooth(sec, alpha)
	clear(t.batch)
	t.items = t.items[:0]
}

// smooth closes the period of length sec for e: a rate that jumped by a
// factor of rateJump (with enough requests behind the reading to tell) is
// taken at once, as the controller takes its arrival rates (a heavy
// tenant's rate that trailed a flood by the smoothing time would make the
// plan believe the flood came from others); otherwise it moves by alpha.
func (e *Tenant) smooth(sec, alpha float64) {
	var cur, got float64
	for c := range e.Rate {
		cur += e.Rate[c]
		got += e.period[c]
	}
	jump := got >= jumpMin && (got > rateJump*cur*sec || got*rateJump < cur*sec)
	for c := range e.Rate {
		r := e.period[c] / sec
		if e.fresh || jump {
			e.Rate[c] = r
		} else {
			e.Rate[c] = smooth.Toward(e.Rate[c], r, alpha)
		}
		e.period[c] = 0
	}
	e.fresh = false
}

// All returns the smoothed rate of every sampled request, per class,
// smoothed as each tenant's is: a tenant's Rate divided by it is the
// tenant's share of the traffic, free of the sampling noise the two have
// in common (with a single tenant, exactly 1).
func (t *Tracker) All() [NumClasses]float64 { return t.all.Rate }

// Top appends the entries whose total rate is at least min to dst, heaviest
// first (ties by key), and returns it.
func (t *Tracker) Top(dst []Tenant, min float64) []Tenant {
	start := len(dst)
	for i := range t.entries {
		if t.entries[i].Total() >= min && t.entries[i].Total() > 0 {
			dst = append(dst, t.entries[i])
		}
	}
	slices.SortFunc(dst[start:], func(a, b Tenant) int { return heavierFirst(a.Total(), b.Total(), a.Key, b.Key) })
	return dst
}

// heavierFirst orders by weight, heaviest first, and equal weights by key:
// a total order, so that no decision depends on map or arrival order.
func heavierFirst(wa, wb float64, ka, kb uint64) int {
	if c := cmp.Compare(wb, wa); c != 0 {
		return c
	}
	return cmp.Compare(ka, kb)
}

// Len returns the number of entries in the heavy-hitter table.
func (t *Tracker) Len() int { return len(t.entries) }

// Active estimates the number of distinct tenants sampled over the last
// 5–10 s (HyperLogLog, ~1.6% standard error, linear counting when small).
func (t *Tracker) Active() float64 {
	var sum float64
	zeros := 0
	for i := range hllRegs {
		r := max(t.hll[0][i], t.hll[1][i])
		if r == 0 {
			zeros++
		}
		sum += math.Ldexp(1, -int(r))
	}
	const m = float64(hllRegs)
	alpha := 0.7213 / (1 + 1.079/m)
	est := alpha * m * m / sum
	if est <= 2.5*m && zeros > 0 {
		est = m * math.Log(m/float64(zeros))
	}
	return est
}

// Rate returns the total smoothed rate of the tenant with the given key, 0
// if it is not in the table.
func (t *Tracker) Rate(key uint64) float64 {
	if i, ok := t.index[Key(key)]; ok {
		return t.entries[i].Total()
	}
	return 0
}
