package proxy

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
)

// fullBalancer is a balancer over n backends of capacity c each, all slots
// taken.
func fullBalancer(n int, c int64) (*balancer, []*backend) {
	rng := rand.New(rand.NewPCG(1, 1))
	var mu sync.Mutex
	bl := newBalancer(func() uint64 { mu.Lock(); defer mu.Unlock(); return rng.Uint64() })
	set := testBackends(n)
	for _, b := range set {
		b.capacity.Store(c)
		b.cost.Store(0x3ff0000000000000) // 1.0
		b.inflight.Store(c)
	}
	bl.set.Store(&set)
	bl.all = set
	return bl, set
}

// TestQueueOrder: when every backend is full, freed slots go to the
// highest criticality first, then the oldest; a full queue displaces the
// newest waiter of a lower criticality; a newcomer never takes a freed
// slot ahead of those waiting.
func TestQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bl, set := fullBalancer(1, 2)
		bl.queue.setMax(4)
		var mu sync.Mutex
		var order []string
		var wg sync.WaitGroup
		held := time.Second
		arrive := func(name string, c levee.Criticality) {
			held += 10 * time.Millisecond // releases one after the other
			hold := held
			wg.Go(func() {
				b, err := bl.acquire(context.Background(), c, exclude{}, time.Minute)
				mu.Lock()
				if err != nil {
					order = append(order, name+":shed")
					mu.Unlock()
					return
				}
				order = append(order, name)
				mu.Unlock()
				time.Sleep(hold)
				bl.release(b)
			})
			synctest.Wait()
		}
		arrive("s1", levee.Sheddable)
		arrive("s2", levee.Sheddable)
		arrive("c1", levee.Critical)
		arrive("p1", levee.SheddablePlus)
		arrive("c2", levee.Critical)  // queue full: displaces s2, the newest of the lowest
		arrive("s3", levee.Sheddable) // full, nothing lower: shed
		bl.release(set[0])
		synctest.Wait()
		bl.release(set[0])
		wg.Wait()
		want := []string{"s2:shed", "s3:shed", "c1", "c2", "p1", "s1"}
		if !slices.Equal(order, want) {
			t.Errorf("order %v, want %v", order, want)
		}
	})
}

// TestQueueWait: a waiter is shed when its wait runs out, answered with
// the deadline rejection when its deadline comes first, and leaves at once
// when its caller does.
func TestQueueWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bl, _ := fullBalancer(2, 1)
		bl.queue.setMax(100)
		start := time.Now()
		_, err := bl.acquire(context.Background(), levee.Critical, exclude{}, 300*time.Millisecond)
		if err != errShed[levee.Critical] || time.Since(start) != 300*time.Millisecond {
			t.Errorf("wait ran out: %v after %v, want the shed rejection after 300ms", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err = bl.acquire(ctx, levee.Critical, exclude{}, time.Second)
		if err != errQueueDeadline {
			t.Errorf("deadline first: %v, want the deadline rejection", err)
		}
		ctx, cancel = context.WithCancel(context.Background())
		go func() { time.Sleep(50 * time.Millisecond); cancel() }()
		_, err = bl.acquire(ctx, levee.Critical, exclude{}, time.Second)
		if err != context.Canceled {
			t.Errorf("caller left: %v, want context.Canceled", err)
		}
		if n := bl.queue.n.Load(); n != 0 {
			t.Errorf("%d waiters left, want 0", n)
		}
	})
}

// TestQueueExclude: a retry waiting for a slot is not handed the backend
// it just failed on.
func TestQueueExclude(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bl, set := fullBalancer(2, 1)
		bl.queue.setMax(10)
		got := make(chan *backend, 1)
		go func() {
			b, _ := bl.acquire(context.Background(), levee.Critical, exclude{set[0]}, time.Minute)
			got <- b
		}()
		synctest.Wait()
		bl.release(set[0]) // not for this waiter
		synctest.Wait()
		if bl.queue.n.Load() != 1 {
			t.Fatalf("the waiter took the excluded backend")
		}
		bl.release(set[1])
		if b := <-got; b != set[1] {
			t.Errorf("got %v, want %s", b, set[1].addr)
		}
	})
}

// TestChoose: two random choices, the lower score wins; an unavailable or
// excluded candidate loses; with neither available, the best of all.
func TestChoose(t *testing.T) {
	set := testBackends(3)
	for i, b := range set {
		b.capacity.Store(10)
		b.cost.Store(0x3ff0000000000000)
		b.inflight.Store(int64([]int{5, 2, 9}[i]))
	}
	// u = 0 draws 0 and 1; u with high half ≥ 2/3 draws 0 and 2.
	tests := []struct {
		u    uint64
		excl exclude
		want int
	}{
		{0, exclude{}, 1},
		{0xffffffff00000000, exclude{}, 0},
		{0, exclude{set[1]}, 0},
		{0xffffffff00000000, exclude{set[0]}, 2}, // the other draw, though busier
	}
	for i, tt := range tests {
		if got := choose(set, tt.excl, tt.u); got != set[tt.want] {
			t.Errorf("case %d: chose %v, want %s", i, got.addr, set[tt.want].addr)
		}
	}
	set[1].inflight.Store(10) // full
	set[0].inflight.Store(10)
	if got := choose(set, exclude{}, 0); got != set[2] {
		t.Errorf("both drawn full: chose %v, want the only one available", got.addr)
	}
	set[2].inflight.Store(10)
	if got := choose(set, exclude{}, 0); got != nil {
		t.Errorf("all full: chose %v, want nil", got.addr)
	}
}

// TestBalanceShares: on virtual time with backends of different speeds,
// power of two choices on in-flight over capacity gives each a share of
// the traffic in proportion to what it serves, and a backend reporting a
// high load gets less.
func TestBalanceShares(t *testing.T) {
	tests := []struct {
		name    string
		service []time.Duration
		load    []float64
		check   func(shares []float64) error
	}{
		{"equal backends: equal shares", []time.Duration{10, 10, 10}, []float64{0, 0, 0}, func(s []float64) error {
			for _, x := range s {
				if x < 0.3 || x > 0.37 {
					return fmt.Errorf("share %.3f, want 1/3 ± 0.035", x)
				}
			}
			return nil
		}},
		{"a backend twice as slow: less", []time.Duration{10, 10, 20}, []float64{0, 0, 0}, func(s []float64) error {
			if s[2] > 0.8*s[0] {
				return fmt.Errorf("slow share %.3f vs %.3f, want clearly less", s[2], s[0])
			}
			return nil
		}},
		{"a backend reporting load 1.5: less", []time.Duration{10, 10, 10}, []float64{0.3, 0.3, 1.5}, func(s []float64) error {
			if s[2] > 0.8*s[0] {
				return fmt.Errorf("loaded share %.3f vs %.3f, want clearly less", s[2], s[0])
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				bl, set := fullBalancer(3, 100)
				for i, b := range set {
					b.inflight.Store(0)
					b.cost.Store(costBits(1 + tt.load[i]))
				}
				served := make([]float64, 3)
				var wg sync.WaitGroup
				for range 20000 {
					time.Sleep(time.Millisecond / 2) // 2000/s; 3 backends of 100 slots
					b := bl.pick(exclude{})
					if b == nil {
						continue
					}
					i := slices.Index(set, b)
					served[i]++
					wg.Go(func() {
						time.Sleep(tt.service[i] * time.Millisecond)
						bl.release(b)
					})
				}
				wg.Wait()
				total := served[0] + served[1] + served[2]
				for i := range served {
					served[i] /= total
				}
				if err := tt.check(served); err != nil {
					t.Errorf("shares %.3f: %v", served, err)
				}
			})
		})
	}
}

func costBits(f float64) uint64 { return math.Float64bits(f) }

// TestQueueHopeless: a newcomer that could not be served within its wait
// at the rate slots are freed is shed at once; one of a higher
// criticality, with fewer waiters ahead of it, waits.
func TestQueueHopeless(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bl, set := fullBalancer(1, 1)
		bl.queue.setMax(100)
		bl.queue.setRate(10) // a slot every 100 ms
		for range 5 {
			go func() { _, _ = bl.acquire(context.Background(), levee.Critical, exclude{}, time.Minute) }()
		}
		synctest.Wait()
		start := time.Now()
		_, err := bl.acquire(context.Background(), levee.Sheddable, exclude{}, 300*time.Millisecond)
		if err != errShed[levee.Sheddable] || time.Since(start) != 0 {
			t.Errorf("SHEDDABLE behind 5: %v after %v, want shed at once", err, time.Since(start))
		}
		got := make(chan *backend, 1)
		go func() {
			b, _ := bl.acquire(context.Background(), levee.CriticalPlus, exclude{}, 300*time.Millisecond)
			got <- b
		}()
		synctest.Wait()
		if n := bl.queue.n.Load(); n != 6 {
			t.Fatalf("%d waiting, want 6: CRITICAL_PLUS waits", n)
		}
		bl.release(set[0])
		if b := <-got; b != set[0] {
			t.Errorf("CRITICAL_PLUS got %v, want the freed slot", b)
		}
		for range 5 {
			bl.release(set[0])
			synctest.Wait()
		}
	})
}
