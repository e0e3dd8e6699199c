package fairq

import (
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"testing"
	"time"
	"unsafe"
)

func TestHashDeterministic(t *testing.T) {
	tests := []struct{ a, b string }{{"", "x"}, {"tenant-1", "tenant-2"}, {"abcdefgh", "abcdefgi"}, {"a long tenant identifier 1", "a long tenant identifier 2"}}
	for _, tt := range tests {
		if got, want := Hash(1, tt.a), Hash(1, tt.a); got != want {
			t.Errorf("Hash(%q) not stable: %x vs %x", tt.a, got, want)
		}
		if Hash(1, tt.a) == Hash(1, tt.b) {
			t.Errorf("Hash(%q) == Hash(%q)", tt.a, tt.b)
		}
		if Hash(1, tt.a) == Hash(2, tt.a) {
			t.Errorf("Hash(%q) ignores the seed", tt.a)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = Hash(3, "tenant-with-a-name") }); n != 0 {
		t.Errorf("Hash allocs = %v, want 0", n)
	}
}

func TestRingKeepsLatest(t *testing.T) {
	var r Ring
	for i := range RingSize + 10 {
		r.Add(uint64(i))
	}
	var got []uint64
	added := r.Drain(func(v uint64) { got = append(got, v) })
	if added != RingSize+10 || len(got) != RingSize || got[0] != 10 {
		t.Fatalf("Drain: added %d, got %d samples starting at %d; want %d, %d, 10", added, len(got), got[0], RingSize+10, RingSize)
	}
	if n := r.Drain(func(uint64) {}); n != 0 {
		t.Errorf("second Drain added = %d, want 0", n)
	}
}

// TestTrackerFindsAbuserAmongMillion feeds one million distinct tenants,
// one request each, plus an abuser sending 5% of the traffic, through the
// ring at a realistic sampling ratio, and checks the abuser tops the table,
// its rate is right, and memory stays bounded.
func TestTrackerFindsAbuserAmongMillion(t *testing.T) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	var ring Ring
	tr := NewTracker(0)
	const (
		distinct = 1_000_000
		period   = 50 * time.Millisecond
		perStep  = 20_000 // requests per period: 400k rps
		sampleN  = 16     // 1 in 16 sampled: ~1250 samples per period
	)
	abuser := Hash(7, "10.9.8.0/24")
	now := time.Unix(0, 0)
	sent, abuserSent := 0, 0
	for i := 0; i < distinct; i++ {
		for _, h := range [2]uint64{Hash(7, fmt.Sprint("id-", i)), abuser} {
			if h == abuser && i%19 != 0 {
				continue
			}
			if h == abuser {
				abuserSent++
			}
			sent++
			if Mix(uint64(sent))%sampleN == 0 {
				ring.Add(Sample(h, 3))
			}
		}
		if sent%perStep == 0 || i == distinct-1 {
			ring.Drain(func(v uint64) { tr.Add(v, sampleN) })
			now = now.Add(period)
			tr.Step(now, period)
		}
	}
	top := tr.Top(nil, 0)
	if len(top) == 0 || top[0].Key != Key(abuser) {
		t.Fatalf("abuser not on top: top=%v", top[:min(3, len(top))])
	}
	secs := float64(sent) / perStep * period.Seconds()
	wantRate := float64(abuserSent) / secs
	if got := top[0].Total(); math.Abs(got-wantRate)/wantRate > 0.2 {
		t.Errorf("abuser rate = %.0f/s, want %.0f/s ±20%%", got, wantRate)
	}
	if tr.Len() > DefaultK {
		t.Errorf("table holds %d entries, want ≤ %d", tr.Len(), DefaultK)
	}
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	live := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	static := int64(unsafe.Sizeof(ring)) + int64(unsafe.Sizeof(*tr))
	t.Logf("live heap growth %d B, ring+tracker structs %d B, active estimate %.0f", live, static, tr.Active())
	if live > 4<<20 {
		t.Errorf("memory after 1M distinct tenants = %d B, want ≤ 4 MiB", live)
	}
	runtime.KeepAlive(tr)
	runtime.KeepAlive(&ring)
}

func TestActiveCount(t *testing.T) {
	tests := []int{1, 20, 1000, 100_000}
	for _, n := range tests {
		tr := NewTracker(0)
		for i := range n {
			tr.Add(Sample(Hash(1, fmt.Sprint("t", i)), 0), 1)
		}
		tr.Step(time.Unix(1, 0), time.Second)
		got := tr.Active()
		if math.Abs(got-float64(n))/float64(n) > 0.06 {
			t.Errorf("Active() with %d tenants = %.1f, want within 6%%", n, got)
		}
	}
}

func TestTrackerRates(t *testing.T) {
	tr := NewTracker(8)
	a, b := Hash(1, "a"), Hash(1, "b")
	now := time.Unix(0, 0)
	for range 100 { // 5 s
		for range 50 { // a: 1000/s of class 1
			tr.Add(Sample(a, 1), 1)
		}
		for range 5 { // b: 100/s of class 3
			tr.Add(Sample(b, 3), 1)
		}
		now = now.Add(50 * time.Millisecond)
		tr.Step(now, 50*time.Millisecond)
	}
	top := tr.Top(nil, 0)
	if len(top) != 2 {
		t.Fatalf("Top = %d entries, want 2", len(top))
	}
	if got := top[0].Rate[1]; math.Abs(got-1000) > 1 {
		t.Errorf("a rate = %v, want 1000", got)
	}
	if got := top[1].Rate[3]; math.Abs(got-100) > 1 {
		t.Errorf("b rate = %v, want 100", got)
	}
}

// TestTrackerTakesJumps: a tenant whose rate jumps by ×2 or more with at
// least jumpMin requests in the period (a flood; or a drop that still
// leaves that many) is taken at the new rate after one period, as admit
// takes its arrival rates; a smaller change is smoothed (0.5 s), and so is
// a jump to or from fewer requests than that (a drop to a trickle, or a
// burst on little evidence: at a few requests a period, Poisson noise and
// bursty retries alone make such swings).
func TestTrackerTakesJumps(t *testing.T) {
	const dt = 50 * time.Millisecond
	rate := func(before, next int) float64 { // requests per period
		tr := NewTracker(8)
		a := Hash(1, "a")
		now := time.Unix(0, 0)
		for i := range 41 { // 2 s at before, then one period at next
			n := before
			if i == 40 {
				n = next
			}
			for range n {
				tr.Add(Sample(a, 0), 1)
			}
			now = now.Add(dt)
			tr.Step(now, dt)
		}
		return tr.Rate(Key(a))
	}
	// One period moves a smoothed rate by 1 − e^(−0.1) ≈ 0.095 of the step.
	for _, tc := range []struct {
		name         string
		before, next int
		lo, hi       float64
	}{
		{"flood 10×", 50, 500, 9999, 10001},
		{"drop to 0.4× (40 requests)", 100, 40, 799, 801},
		{"up 1.5× (smoothed)", 50, 75, 1040, 1055},
		{"drop to 1/10 (5 requests, smoothed)", 50, 5, 900, 920},
		{"burst 10× on 20 requests (smoothed)", 2, 20, 70, 80},
	} {
		if got := rate(tc.before, tc.next); got < tc.lo || got > tc.hi {
			t.Errorf("%s: rate %.1f/s after one period, want in [%v, %v]", tc.name, got, tc.lo, tc.hi)
		}
	}
}

// TestTrackerPrefixes: tenants sampled with their address prefixes (as
// admit samples untrusted callers) are tracked per prefix too: its rate,
// its parent and how many distinct tenants sent under it.
func TestTrackerPrefixes(t *testing.T) {
	tr := NewTracker(0)
	var ring Ring
	const dt = 50 * time.Millisecond
	now := time.Unix(0, 0)
	sybil48, sybil32 := PrefixKeys(1, netip.MustParseAddr("2001:db8:aaaa::1"))
	lone48, _ := PrefixKeys(1, netip.MustParseAddr("2001:db8:1::1"))
	for step := range 100 { // 5 s
		for i := range 100 { // 2000/s over 2,000 /64s of one /48
			n := step*100 + i
			a := netip.MustParseAddr(fmt.Sprintf("2001:db8:aaaa:%x::1", n%2000))
			l1, l2 := PrefixKeys(1, a)
			leaf := Hash(1, fmt.Sprintf("2001:db8:aaaa:%x::/64", n%2000))
			ring.Add3(ParentsSample(leaf, 2), ParentSample(l1, 1, 2), ParentSample(l2, 2, 2))
		}
		for range 5 { // one tenant alone in its /48: 100/s
			l1, l2 := PrefixKeys(1, netip.MustParseAddr("2001:db8:1:1::1"))
			ring.Add3(ParentsSample(Hash(1, "lone"), 3), ParentSample(l1, 1, 3), ParentSample(l2, 2, 3))
		}
		ring.Add(ParentSample(lone48, 1, 0)) // an orphan (its tenant overwritten): ignored
		ring.Drain(func(v uint64) { tr.Add(v, 1) })
		now = now.Add(dt)
		tr.Step(now, dt)
	}
	pre := tr.Prefixes(nil, 1, 0)
	if len(pre) < 2 || pre[0].Key != Key(sybil48) {
		t.Fatalf("level-1 prefixes %v: want the sybil /48 first", pre)
	}
	if got := pre[0].Total(); math.Abs(got-2000) > 20 {
		t.Errorf("sybil /48 rate %.0f/s, want 2000", got)
	}
	if got := pre[0].Children; math.Abs(got-2000)/2000 > 0.25 {
		t.Errorf("sybil /48 children %.0f, want 2000 ± 25%%", got)
	}
	if pre[0].Parent[1] != Key(sybil32) {
		t.Errorf("sybil /48's parent %x, want its /32 %x", pre[0].Parent[1], Key(sybil32))
	}
	if pre[1].Key != Key(lone48) || math.Abs(pre[1].Total()-100) > 1 || pre[1].Children > 1.5 {
		t.Errorf("lone /48: key %x rate %.0f children %.1f, want %x, 100/s (the orphan ignored), 1", pre[1].Key, pre[1].Total(), pre[1].Children, Key(lone48))
	}
	top := tr.Top(nil, 0)
	if top[0].Key != Key(Hash(1, "lone")) || top[0].Parent[0] != Key(lone48) {
		t.Errorf("heaviest tenant %x with parent %x, want lone under %x", top[0].Key, top[0].Parent[0], Key(lone48))
	}
	if got := tr.Active(); math.Abs(got-2001)/2001 > 0.05 {
		t.Errorf("active tenants %.0f, want 2001 (prefix samples are not tenants)", got)
	}
}

func TestPrefixKeys(t *testing.T) {
	k := func(s string) (uint64, uint64) { return PrefixKeys(7, netip.MustParseAddr(s)) }
	a1, a2 := k("2001:db8:1:2::1")
	b1, b2 := k("2001:db8:1:ffff::9")
	c1, c2 := k("2001:db8:2::1")
	if a1 != b1 || a1 == c1 || a2 != c2 || a1 == a2 {
		t.Errorf("IPv6: same /48 → same level 1, same /32 → same level 2; got %x %x %x / %x %x %x", a1, b1, c1, a2, b2, c2)
	}
	v1, v2 := k("198.51.100.7")
	w1, _ := k("198.51.7.1")
	m1, _ := k("::ffff:198.51.3.3")
	if v1 != w1 || v1 != m1 || v2 != 0 {
		t.Errorf("IPv4: one /16, mapped or not, no level 2; got %x %x %x %x", v1, w1, m1, v2)
	}
	if x, y := PrefixKeys(7, netip.Addr{}); x != 0 || y != 0 {
		t.Error("invalid address has prefix keys")
	}
	if n := testing.AllocsPerRun(100, func() { k("2001:db8:1:2::1") }); n != 0 {
		t.Errorf("PrefixKeys allocs %v, want 0", n)
	}
}
