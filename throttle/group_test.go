package throttle

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// TestGroupChurn: 20,000 new keys through a Group of 1024 keep it at 1024,
// each new key costs a bounded number of allocations (its Throttle, its
// entry, its bucket's copy: no copy of the table), and a key in use
// survives the churn around it.
func TestGroupChurn(t *testing.T) {
	g := NewGroup()
	hot := g.Get("api.internal:443")
	i := 0
	allocs := testing.AllocsPerRun(20_000, func() {
		i++
		now := t0.Add(time.Duration(i) * time.Millisecond)
		g.Get("host-" + strconv.Itoa(i) + ".example")
		hot.AllowAt(now, levee.Critical) // keeps the hot key busy
	})
	if n := g.Len(); n != 1024 {
		t.Errorf("Len = %d after churn, want 1024", n)
	}
	// The key and its Throttle (2), the entry (1), the bucket copy (1),
	// the key's string (1).
	if allocs > 6 {
		t.Errorf("%.1f allocations per new key, want ≤ 6 (no copy of the table)", allocs)
	}
	if g.Get("api.internal:443") != hot {
		t.Error("the key in use was evicted by the churn")
	}
	n := 0
	g.Range(func(string, *Throttle) bool { n++; return true })
	if n != 1024 {
		t.Errorf("Range saw %d keys, want 1024", n)
	}
}

// TestGroupConcurrentChurn: readers of known keys and writers of new keys
// at once (run with -race).
func TestGroupConcurrentChurn(t *testing.T) {
	g := NewGroup(WithMaxKeys(64))
	known := g.Get("known")
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				if w%2 == 0 {
					g.Get("new-" + strconv.Itoa(w) + "-" + strconv.Itoa(i))
				} else if th := g.Get("known"); th == nil {
					t.Error("Get returned nil")
					return
				}
				known.AllowAt(t0.Add(time.Duration(i)*time.Millisecond), levee.Critical)
			}
		}()
	}
	wg.Wait()
	if n := g.Len(); n > 64 {
		t.Errorf("Len = %d, want ≤ 64", n)
	}
}

// BenchmarkGroup: Get of a known key (lock-free, no allocation) and of a
// new key in a full Group (the churn case: one eviction, one bucket copy).
func BenchmarkGroup(b *testing.B) {
	b.Run("known", func(b *testing.B) {
		g := NewGroup()
		for i := range 1024 {
			g.Get("host-" + strconv.Itoa(i))
		}
		b.ReportAllocs()
		for b.Loop() {
			g.Get("host-512")
		}
	})
	b.Run("known-parallel", func(b *testing.B) {
		g := NewGroup()
		for i := range 1024 {
			g.Get("host-" + strconv.Itoa(i))
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				g.Get("host-512")
			}
		})
	})
	b.Run("new-in-full", func(b *testing.B) {
		g := NewGroup()
		keys := make([]string, 1024+b.N)
		for i := range keys {
			keys[i] = "host-" + strconv.Itoa(i) + ".example"
		}
		for _, k := range keys[:1024] {
			g.Get(k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			g.Get(keys[1024+i])
		}
	})
}

// BenchmarkGroupNewPerTimeNow measures a new key in a full Group against
// time.Now in interleaved chunks of the same run (robust to a busy
// machine): new-ns is the cost of one new key, new/timenow its ratio to one
// time.Now (about 55 ns on an idle reference VM).
func BenchmarkGroupNewPerTimeNow(b *testing.B) {
	g := NewGroup()
	for i := range 1024 {
		g.Get("warm-" + strconv.Itoa(i))
	}
	keys := make([]string, 1000)
	var inNew, inNow time.Duration
	n, round := 0, 0
	for b.Loop() {
		for i := range keys {
			keys[i] = "host-" + strconv.Itoa(round) + "-" + strconv.Itoa(i) + ".example"
		}
		round++
		s := time.Now()
		for _, k := range keys {
			g.Get(k)
		}
		m := time.Now()
		for range keys {
			sinkTime = time.Now()
		}
		inNew += m.Sub(s)
		inNow += time.Since(m)
		n += len(keys)
	}
	b.ReportMetric(float64(inNew)/float64(n), "new-ns")
	b.ReportMetric(float64(inNow)/float64(n), "timenow-ns")
	b.ReportMetric(float64(inNew)/float64(inNow), "new/timenow")
}
