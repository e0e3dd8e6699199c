package retry

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFloorSixtyPerMinuteExact(t *testing.T) {
	// The founding text's budget: 60 retries per minute, then fail at once.
	b := NewBudget(WithRatio(0, 0))
	perMinute := map[int]int{}
	for ms := 0; ms < 10*60*1000; ms += 100 { // a retry wanted every 100 ms
		now := t0.Add(time.Duration(ms) * time.Millisecond)
		if b.TryRetryAt(now) {
			perMinute[ms/60000]++
		}
	}
	for m := range 10 {
		if perMinute[m] != 60 {
			t.Errorf("minute %d: %d retries granted, want exactly 60", m, perMinute[m])
		}
	}
	st := b.Stats()
	if st.Retries != 600 || st.Refused != 6000-600 {
		t.Errorf("stats %+v, want 600 retries, 5400 refused", st)
	}
}

func TestFloorSlidingWindow(t *testing.T) {
	// Never more than 60 grants in any 60 s, however the demand is timed.
	b := NewBudget(WithRatio(0, 0))
	var grants []time.Time
	for i := range 5000 {
		// bursts at irregular instants
		now := t0.Add(time.Duration(i*i%997) * 50 * time.Millisecond).Add(time.Duration(i) * 37 * time.Millisecond)
		if b.TryRetryAt(now) {
			grants = append(grants, now)
		}
	}
	for i := range grants {
		n := 0
		for j := i; j < len(grants) && grants[j].Sub(grants[i]) < time.Minute; j++ {
			n++
		}
		if n > 60 {
			t.Fatalf("%d grants within a minute from %v, want ≤ 60", n, grants[i])
		}
	}
}

func TestRatioBound(t *testing.T) {
	// A busy client: 1000 requests/s for 2 minutes, every one failing and
	// asking for a retry. Retries stay at 10% of requests plus the floor.
	tests := []struct {
		name  string
		b     *Budget
		ratio float64
		floor float64 // per minute
	}{
		{"default", NewBudget(), 0.1, 60},
		{"20% no floor", NewBudget(WithRatio(0.2, 0), WithFloor(0, 0)), 0.2, 0},
		{"ratio only 5%/1s", NewBudget(WithRatio(0.05, time.Second), WithFloor(0, 0)), 0.05, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req, ret float64
			for us := 0; us < 120e6; us += 1000 {
				now := t0.Add(time.Duration(us) * time.Microsecond)
				tt.b.RequestAt(now)
				req++
				if tt.b.TryRetryAt(now) {
					ret++
				}
			}
			limit := tt.ratio*req + tt.floor*2
			t.Logf("requests %.0f, retries %.0f (%.2f%%), limit %.0f", req, ret, 100*ret/req, limit)
			if ret > limit {
				t.Errorf("retries %.0f, want ≤ %.0f", ret, limit)
			}
			if ret < 0.95*limit {
				t.Errorf("retries %.0f, want close to %.0f (the budget should be usable)", ret, limit)
			}
		})
	}
}

func TestQuietClientUsesFloor(t *testing.T) {
	// One request a minute: the ratio gives nothing (10% of 1), the floor
	// still allows the retry.
	b := NewBudget()
	for m := range 10 {
		now := t0.Add(time.Duration(m) * time.Minute)
		b.RequestAt(now)
		if !b.TryRetryAt(now) {
			t.Fatalf("minute %d: quiet client refused its retry", m)
		}
	}
}

func TestBudgetEdges(t *testing.T) {
	var nilB *Budget
	if nilB.TryRetryAt(t0) {
		t.Error("nil Budget granted a retry")
	}
	nilB.RequestAt(t0)
	var zero Budget
	if zero.TryRetryAt(t0) {
		t.Error("zero Budget granted a retry")
	}
	for range 1000 {
		if !Unlimited().TryRetryAt(t0) {
			t.Fatal("Unlimited refused a retry")
		}
	}
	if DefaultBudget() != DefaultBudget() {
		t.Error("DefaultBudget is not shared")
	}
	if p := (Policy{}); p.budget() != DefaultBudget() {
		t.Error("a zero Policy does not use DefaultBudget")
	}
	// Virtual clocks may start at the zero time.
	b := NewBudget(WithRatio(0, 0), WithFloor(2, time.Second))
	var z time.Time
	if !b.TryRetryAt(z) || !b.TryRetryAt(z) || b.TryRetryAt(z) || !b.TryRetryAt(z.Add(time.Second)) {
		t.Error("floor 2/s wrong at the zero time")
	}
}

func TestBudgetConcurrent(t *testing.T) {
	b := NewBudget(WithRatio(0, 0))
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for range 1000 {
				if b.TryRetryAt(t0) {
					n++
				}
			}
			mu.Lock()
			granted += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if granted != 60 {
		t.Errorf("4 goroutines at one instant were granted %d retries, want 60", granted)
	}
}

func TestBudgetAllocs(t *testing.T) {
	b := NewBudget()
	now := t0
	f := func() {
		now = now.Add(time.Millisecond)
		b.RequestAt(now)
		b.TryRetryAt(now)
	}
	if n := testing.AllocsPerRun(1000, f); n != 0 {
		t.Errorf("RequestAt+TryRetryAt: %v allocs per run, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { b.Request(); b.TryRetry() }); n != 0 {
		t.Errorf("Request+TryRetry: %v allocs per run, want 0", n)
	}
}

func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	var s time.Time
	for b.Loop() {
		s = time.Now()
	}
	_ = s
}

func BenchmarkBudget(b *testing.B) {
	b.Run("request-at", func(b *testing.B) {
		bu := NewBudget()
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			bu.RequestAt(now)
		}
	})
	b.Run("retry-at", func(b *testing.B) {
		// A busy client: the ratio part grants one retry in ten, the
		// floor the first 60; most calls are refusals after a full scan.
		bu := NewBudget()
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			bu.TryRetryAt(now)
		}
	})
	b.Run("request-per-timenow", func(b *testing.B) {
		// The same-run ratio: chunks of RequestAt+TryRetryAt and of
		// time.Now interleaved.
		bu := NewBudget()
		now := t0
		var inBudget, inNow time.Duration
		n := 0
		var sink time.Time
		for b.Loop() {
			s := time.Now()
			for range 1000 {
				now = now.Add(time.Microsecond)
				bu.RequestAt(now)
				bu.TryRetryAt(now)
			}
			m := time.Now()
			for range 1000 {
				sink = time.Now()
			}
			inBudget += m.Sub(s)
			inNow += time.Since(m)
			n += 1000
		}
		_ = sink
		b.ReportMetric(float64(inBudget)/float64(n), "request+retry-ns")
		b.ReportMetric(float64(inNow)/float64(n), "timenow-ns")
		b.ReportMetric(float64(inBudget)/float64(inNow), "budget/timenow")
	})
	b.Run("request+retry-at", func(b *testing.B) {
		bu := NewBudget()
		now := t0
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			bu.RequestAt(now)
			bu.TryRetryAt(now)
		}
	})
	b.Run("request+retry", func(b *testing.B) {
		bu := NewBudget()
		b.ReportAllocs()
		for b.Loop() {
			bu.Request()
			bu.TryRetry()
		}
	})
	b.Run("request+retry-parallel", func(b *testing.B) {
		bu := NewBudget()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.Request()
				bu.TryRetry()
			}
		})
	})
}

func TestBudgetAcrossTheEpoch(t *testing.T) {
	// Virtual clocks that start before 1970 and cross it keep the window.
	b := NewBudget(WithFloor(0, 0))
	start := time.Unix(-5, 0)
	granted := 0
	for ms := 0; ms < 10000; ms++ {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		b.RequestAt(now)
		if b.TryRetryAt(now) {
			granted++
		}
	}
	if granted < 990 || granted > 1000 {
		t.Errorf("%d retries for 10000 requests across 1970, want ≈ 1000", granted)
	}
}

func TestBudgetOptionsOutOfRangePanic(t *testing.T) {
	tests := []struct {
		opt  BudgetOption
		want string
	}{
		{WithRatio(-0.1, 0), "retry: WithRatio(-0.1, 0s): ratio must be in [0, 1]"},
		{WithRatio(math.NaN(), 0), "retry: WithRatio(NaN, 0s): ratio must be in [0, 1]"},
		{WithRatio(1.5, 0), "retry: WithRatio(1.5, 0s): ratio must be in [0, 1]"},
		{WithRatio(0.1, -time.Second), "retry: WithRatio(0.1, -1s): window must be in [100ms, 24h] (0 means the default, 10s)"},
		{WithRatio(0.1, time.Millisecond), "retry: WithRatio(0.1, 1ms): window must be in [100ms, 24h] (0 means the default, 10s)"},
		{WithFloor(-1, 0), "retry: WithFloor(-1, 0s): n must be in [0, 1e6]"},
		{WithFloor(60, -time.Minute), "retry: WithFloor(60, -1m0s): per must be in [1ms, 24h] (0 means the default, 1m)"},
	}
	for _, tt := range tests {
		got := func() (msg string) {
			defer func() { msg = fmt.Sprint(recover()) }()
			NewBudget(tt.opt)
			return "no panic"
		}()
		if got != tt.want {
			t.Errorf("NewBudget: panic %q, want %q", got, tt.want)
		}
	}
}

func TestBudgetOptionsZero(t *testing.T) {
	b := NewBudget(WithRatio(0.1, 0), WithFloor(60, 0))
	d := NewBudget()
	if b.bucketUs != d.bucketUs || b.floorUs != d.floorUs || len(b.log) != len(d.log) || b.ratio != d.ratio {
		t.Errorf("zero windows: bucket %dµs floor window %dµs floor %d ratio %v, want the defaults %dµs %dµs %d %v",
			b.bucketUs, b.floorUs, len(b.log), b.ratio, d.bucketUs, d.floorUs, len(d.log), d.ratio)
	}
	if b := NewBudget(WithRatio(0, 0), WithFloor(0, 0)); b.ring != nil || b.log != nil {
		t.Errorf("ratio 0 and floor 0: ring %d log %d, want both off", len(b.ring), len(b.log))
	}
}
