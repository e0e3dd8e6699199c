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

// A sample is one word: a tenant key with its four low bits used for the
// class (bits 0–1) and a tag (bits 2–3) that says where the sample sits in
// an address hierarchy (see AddrSample).
const (
	tagLeaf    = 0 // a tenant without prefixes
	tagParents = 1 // a tenant whose prefix samples follow it in the ring
	tagLevel1  = 2 // the tenant's first prefix (IPv6 /48, IPv4 /16)
	tagLevel2  = 3 // its second (IPv6 /32)
	tagShift   = 2
	lowBits    = 0xF
)

// NumLevels is the number of prefix levels above a tenant.
const NumLevels = 2

// Key returns the tenant part of a sample or hash: the hash with its four
// low bits cleared.
func Key(h uint64) uint64 { return h &^ lowBits }

// Sample packs a tenant hash and a class (0..3) into one word for a Ring.
func Sample(h uint64, class int) uint64 { return Key(h) | uint64(class&(NumClasses-1)) }

// withTag returns a sample of key h, class and tag.
func withTag(h uint64, class, tag int) uint64 {
	return Key(h) | uint64(tag)<<tagShift | uint64(class&(NumClasses-1))
}

// Tenant is one heavy-hitter entry: a tenant, or (Level ≥ 1) a prefix of
// tenants' addresses.
type Tenant struct {
	// Key identifies the tenant or prefix (Key of its hash).
	Key uint64
	// Rate is the smoothed arrival rate in requests per second, per class.
	// A prefix's counts every request of every address under it.
	Rate [NumClasses]float64
	// Samples is the decayed number of samples behind the entry (5 s time
	// constant), whatever their weight: the evidence its rate rests on.
	Samples float64
	// Level is 0 for a tenant, 1 or 2 for a prefix.
	Level int
	// Parent holds, for a tenant, the keys of its prefixes at levels 1 and
	// 2 (0 if none); for a level-1 prefix, Parent[1] is its level-2 prefix.
	Parent [NumLevels]uint64
	// Children estimates, for a prefix, how many distinct tenants sent under
	// it over the last 5–10 s.
	Children float64
	// count is the decayed sampled weight that ranks entries for eviction.
	count float64
	// period accumulates this period's weight per class, nPeriod its
	// number of samples.
	period  [NumClasses]float64
	nPeriod float64
	fresh   bool
}

// Total returns the tenant's rate summed over classes.
func (t *Tenant) Total() float64 { return t.Rate[0] + t.Rate[1] + t.Rate[2] + t.Rate[3] }

const (
	hllBits = 12
	hllRegs = 1 << hllBits
	kidRegs = 128 // registers of a prefix's HyperLogLog of its tenants (±9%)
	// rateJump and jumpMin: a tenant's rate that changes by this factor
	// within one period, with at least jumpMin requests in the period, is
	// taken at once instead of smoothed.
	rateJump = 2.0
	jumpMin  = 32
	// DefaultK is the default number of heavy-hitter entries.
	DefaultK = 256
	// prefixK is the number of entries of each prefix level.
	prefixK = 64
	// maxReplacements bounds the work of one Step when many new tenants
	// arrive at once (e.g. an attacker rotating ids).
	maxReplacements = 256
)

// Tracker keeps the heavy hitters, the heavy prefixes and the number of
// active tenants. It is used by one goroutine (the control loop) and is not
// safe for concurrent use. Memory is bounded by K entries, 2×64 prefix
// entries and one period's distinct samples (at most RingSize).
type Tracker struct {
	all    Tenant // every tenant sample, whatever its tenant
	leaves table
	levels [NumLevels]table
	// cur is the tenant whose prefix samples are being read (tagParents).
	cur    uint64
	curLvl uint64 // the level-1 prefix just read, for its level-2 parent

	hll      [2][hllRegs]uint8
	gen      int
	genStart time.Time
	genLen   time.Duration
	rateTau  time.Duration
	countTau time.Duration
}

// table is a Space-Saving heavy-hitter table of at most k entries.
type table struct {
	k       int
	level   int
	entries []Tenant
	index   map[uint64]int32
	batch   map[uint64]int32
	items   []batchItem
	// kids holds each prefix's HyperLogLog of its tenants, two rotating
	// generations like the Tracker's (prefix levels only).
	kids map[uint64]*[2][kidRegs]uint8
}

type batchItem struct {
	key    uint64
	w      [NumClasses]float64
	tot    float64
	n      float64
	parent [NumLevels]uint64
}

func newTable(k, level int) table {
	t := table{
		k:       k,
		level:   level,
		entries: make([]Tenant, 0, k),
		index:   make(map[uint64]int32, k),
		batch:   make(map[uint64]int32, 256),
	}
	if level > 0 {
		t.kids = make(map[uint64]*[2][kidRegs]uint8, k)
	}
	return t
}

// NewTracker returns a Tracker with at most k heavy-hitter entries (k ≤ 0
// means DefaultK) and 64 entries per prefix level. Rates are smoothed with
// a 0.5 s time constant, eviction counts decay with 5 s, and active
// tenants are counted over the last 5–10 s.
func NewTracker(k int) *Tracker {
	if k <= 0 {
		k = DefaultK
	}
	t := &Tracker{
		all:      Tenant{fresh: true},
		leaves:   newTable(k, 0),
		genLen:   5 * time.Second,
		rateTau:  500 * time.Millisecond,
		countTau: 5 * time.Second,
	}
	for l := range t.levels {
		t.levels[l] = newTable(prefixK, l+1)
	}
	return t
}

// Add records one sample (as built by Sample, or by AddrSample and read
// from a Ring in order) of the current period with the given weight (the
// sampling ratio: a sample stands for weight requests).
func (t *Tracker) Add(sample uint64, weight float64) {
	key, class, tag := Key(sample), int(sample&(NumClasses-1)), int(sample>>tagShift&3)
	switch tag {
	case tagLeaf, tagParents:
		t.cur, t.curLvl = 0, 0
		if tag == tagParents {
			t.cur = key
		}
		// HyperLogLog: register from the top bits, rank from the rest.
		reg := key >> (64 - hllBits)
		rho := uint8(bits.LeadingZeros64(key<<hllBits|1<<(hllBits-1))) + 1
		if rho > t.hll[t.gen][reg] {
			t.hll[t.gen][reg] = rho
		}
		t.leaves.add(key, class, weight)
		t.all.period[class] += weight
	case tagLevel1:
		if t.cur == 0 || t.curLvl != 0 {
			t.cur, t.curLvl = 0, 0
			return // not right after its tenant: an orphan (the ring wrapped)
		}
		t.prefix(0, key, class, weight)
		t.curLvl = key
	case tagLevel2:
		if t.cur == 0 || t.curLvl == 0 {
			t.cur, t.curLvl = 0, 0
			return
		}
		t.prefix(1, key, class, weight)
		t.levels[0].items[t.levels[0].batch[t.curLvl]].parent[1] = key
		t.cur, t.curLvl = 0, 0
	}
}

// prefix records a sample of the level-(l+1) prefix key of the tenant
// t.cur.
func (t *Tracker) prefix(l int, key uint64, class int, weight float64) {
	t.levels[l].add(key, class, weight)
	t.levels[l].kid(key, t.gen, t.cur)
	t.leaves.items[t.leaves.batch[t.cur]].parent[l] = key
}

// add adds a sample of key to the period's batch.
func (tb *table) add(key uint64, class int, weight float64) {
	i, ok := tb.batch[key]
	if !ok {
		i = int32(len(tb.items))
		tb.batch[key] = i
		tb.items = append(tb.items, batchItem{key: key})
	}
	it := &tb.items[i]
	it.w[class] += weight
	it.tot += weight
	it.n++
}

// kid records tenant under prefix key in generation gen.
func (tb *table) kid(key uint64, gen int, tenant uint64) {
	h := tb.kids[key]
	if h == nil {
		h = new([2][kidRegs]uint8)
		tb.kids[key] = h
	}
	reg := tenant >> (64 - 7)
	rho := uint8(bits.LeadingZeros64(tenant<<7|1<<6)) + 1
	if rho > h[gen][reg] {
		h[gen][reg] = rho
	}
}

// Step closes the period of length dt ending at now: merges the period's
// samples into the heavy-hitter tables and updates the smoothed rates.
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
		for l := range t.levels {
			for _, h := range t.levels[l].kids {
				h[t.gen] = [kidRegs]uint8{}
			}
		}
		t.genStart = now
	}
	decay := smooth.Decay(dt, t.countTau)
	alpha := smooth.Alpha(dt, t.rateTau)
	t.leaves.step(decay, alpha, sec)
	for l := range t.levels {
		tb := &t.levels[l]
		tb.step(decay, alpha, sec)
		for i := range tb.entries {
			if h := tb.kids[tb.entries[i].Key]; h != nil {
				tb.entries[i].Children = kidCount(h)
			}
		}
		// Forget the children of prefixes the table did not keep.
		for k := range tb.kids {
			if _, ok := tb.index[k]; !ok {
				delete(tb.kids, k)
			}
		}
	}
	t.all.smooth(sec, alpha)
	t.cur, t.curLvl = 0, 0
}

// step merges the batch into the table (Space-Saving) and smooths rates.
func (tb *table) step(decay, alpha, sec float64) {
	// Heaviest first, ties by key: deterministic whatever the map order.
	slices.SortFunc(tb.items, func(a, b batchItem) int { return heavierFirst(a.tot, b.tot, a.key, b.key) })
	for i := range tb.entries {
		tb.entries[i].count *= decay
		tb.entries[i].Samples *= decay
	}
	replaced := 0
	for _, it := range tb.items {
		if j, ok := tb.index[it.key]; ok {
			e := &tb.entries[j]
			e.count += it.tot
			e.nPeriod += it.n
			for c := range e.period {
				e.period[c] += it.w[c]
			}
			e.setParents(it.parent)
			continue
		}
		fresh := Tenant{Key: it.key, count: it.tot, period: it.w, nPeriod: it.n, fresh: true, Level: tb.level}
		fresh.setParents(it.parent)
		if len(tb.entries) < tb.k {
			tb.index[it.key] = int32(len(tb.entries))
			tb.entries = append(tb.entries, fresh)
			continue
		}
		if replaced >= maxReplacements {
			continue
		}
		// Space-Saving: the newcomer takes the place of the smallest entry
		// and inherits its count as an upper bound of what it missed.
		m := 0
		for j := 1; j < len(tb.entries); j++ {
			a, b := &tb.entries[j], &tb.entries[m]
			if a.count < b.count || (a.count == b.count && a.Key < b.Key) {
				m = j
			}
		}
		delete(tb.index, tb.entries[m].Key)
		tb.index[it.key] = int32(m)
		fresh.count += tb.entries[m].count
		tb.entries[m] = fresh
		replaced++
	}
	for i := range tb.entries {
		tb.entries[i].smooth(sec, alpha)
	}
	clear(tb.batch)
	tb.items = tb.items[:0]
}

// setParents keeps the parents a sample named (a tenant's prefixes do not
// change; a zero means the sample did not say).
func (e *Tenant) setParents(p [NumLevels]uint64) {
	for l, k := range p {
		if k != 0 {
			e.Parent[l] = k
		}
	}
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
	e.Samples += e.nPeriod
	e.nPeriod = 0
	e.fresh = false
}

// All returns the smoothed rate of every sampled request, per class,
// smoothed as each tenant's is: a tenant's Rate divided by it is the
// tenant's share of the traffic, free of the sampling noise the two have
// in common (with a single tenant, exactly 1).
func (t *Tracker) All() [NumClasses]float64 { return t.all.Rate }

// Top appends the tenants whose total rate is at least min to dst,
// heaviest first (ties by key), and returns it.
func (t *Tracker) Top(dst []Tenant, min float64) []Tenant {
	return t.leaves.top(dst, min)
}

// Prefixes appends the prefixes of level (1 or 2) whose total rate is at
// least min to dst, heaviest first (ties by key), and returns it.
func (t *Tracker) Prefixes(dst []Tenant, level int, min float64) []Tenant {
	if level < 1 || level > NumLevels {
		return dst
	}
	return t.levels[level-1].top(dst, min)
}

func (tb *table) top(dst []Tenant, min float64) []Tenant {
	start := len(dst)
	for i := range tb.entries {
		if tb.entries[i].Total() >= min && tb.entries[i].Total() > 0 {
			dst = append(dst, tb.entries[i])
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

// Len returns the number of entries in the tenants' heavy-hitter table.
func (t *Tracker) Len() int { return len(t.leaves.entries) }

// Active estimates the number of distinct tenants sampled over the last
// 5–10 s (HyperLogLog, ~1.6% standard error, linear counting when small).
func (t *Tracker) Active() float64 {
	return hllCount(func(i int) uint8 { return max(t.hll[0][i], t.hll[1][i]) }, hllRegs)
}

// kidCount estimates the distinct tenants of a prefix.
func kidCount(h *[2][kidRegs]uint8) float64 {
	return hllCount(func(i int) uint8 { return max(h[0][i], h[1][i]) }, kidRegs)
}

// hllCount is the HyperLogLog estimate over m registers read by reg, with
// linear counting while small.
func hllCount(reg func(int) uint8, m int) float64 {
	var sum float64
	zeros := 0
	for i := range m {
		r := reg(i)
		if r == 0 {
			zeros++
		}
		sum += math.Ldexp(1, -int(r))
	}
	fm := float64(m)
	alpha := 0.7213 / (1 + 1.079/fm)
	if m == 64 {
		alpha = 0.709
	}
	est := alpha * fm * fm / sum
	if est <= 2.5*fm && zeros > 0 {
		est = fm * math.Log(fm/float64(zeros))
	}
	return est
}

// Rate returns the total smoothed rate of the tenant with the given key, 0
// if it is not in the table.
func (t *Tracker) Rate(key uint64) float64 {
	if i, ok := t.leaves.index[Key(key)]; ok {
		return t.leaves.entries[i].Total()
	}
	return 0
}
