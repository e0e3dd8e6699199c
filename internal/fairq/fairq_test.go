package fairq

import (
	"fmt"
	"math"
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
