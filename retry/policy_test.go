package retry

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestCeiling(t *testing.T) {
	tests := []struct {
		p    Policy
		n    int
		want time.Duration
	}{
		{Policy{}, 1, 100 * time.Millisecond},
		{Policy{}, 2, 200 * time.Millisecond},
		{Policy{}, 0, 100 * time.Millisecond},
		{Policy{}, 8, 10 * time.Second}, // 12.8s capped
		{Policy{}, 1000, 10 * time.Second},
		{Policy{Base: 3 * time.Second, Cap: 12 * time.Second}, 3, 12 * time.Second},
		{Policy{Base: time.Second, Multiplier: 3}, 3, 9 * time.Second},
		{Policy{Base: time.Second, Multiplier: 0.5}, 3, 4 * time.Second}, // below 1 counts as 2
		{Policy{Base: time.Minute}, 1, 10 * time.Second},                 // base above cap
	}
	for _, tt := range tests {
		if got := tt.p.Ceiling(tt.n); got != tt.want {
			t.Errorf("%+v.Ceiling(%d) = %v, want %v", tt.p, tt.n, got, tt.want)
		}
	}
}

func TestSeedSchedule(t *testing.T) {
	// The founding text's 3s→6s→12s.
	p := Policy{Base: 3 * time.Second, Cap: 12 * time.Second, Jitter: NoJitter, MaxAttempts: 4}
	want := []time.Duration{3 * time.Second, 6 * time.Second, 12 * time.Second}
	for n, w := range want {
		if got := p.Backoff(n+1, 0, 0.3); got != w {
			t.Errorf("retry %d: backoff %v, want %v", n+1, got, w)
		}
	}
}

func TestBackoffBounds(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	base, limit := 100*time.Millisecond, 5*time.Second
	for _, j := range []Jitter{FullJitter, EqualJitter, DecorrelatedJitter, NoJitter} {
		p := Policy{Base: base, Cap: limit, Jitter: j}
		var prev time.Duration
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for i := range 100000 {
			n := 1 + i%10
			if n == 1 {
				prev = 0
			}
			u := r.Float64()
			if i%1000 == 0 {
				u = 0
			}
			if i%1000 == 1 {
				u = 0.9999999999
			}
			got := p.Backoff(n, prev, u)
			ceil := p.Ceiling(n)
			var min, max time.Duration
			switch j {
			case FullJitter:
				min, max = 0, ceil
			case EqualJitter:
				min, max = ceil/2, ceil
			case DecorrelatedJitter:
				min, max = base, limit
				if prev > 0 {
					max = minDur(limit, 3*prev)
				} else {
					max = minDur(limit, 3*base)
				}
			case NoJitter:
				min, max = ceil, ceil
			}
			if got < min || got > max {
				t.Fatalf("%v: Backoff(%d, %v, %v) = %v, want in [%v, %v]", j, n, prev, u, got, min, max)
			}
			lo, hi = minDur(lo, got), maxDur(hi, got)
			prev = got
		}
		t.Logf("%-12v observed [%v, %v]", j, lo, hi)
	}
}

func TestBackoffClampsU(t *testing.T) {
	p := Policy{Base: time.Second}
	for _, u := range []float64{-1, 2, nan()} {
		if got := p.Backoff(1, 0, u); got < 0 || got > time.Second {
			t.Errorf("Backoff(1, 0, %v) = %v, want in [0, 1s]", u, got)
		}
	}
}

func nan() float64 { z := 0.0; return z / z }

func minDur(a, b time.Duration) time.Duration { return min(a, b) }
func maxDur(a, b time.Duration) time.Duration { return max(a, b) }

func TestSpreadOf1000Clients(t *testing.T) {
	// 1000 clients fail at the same instant; their first retries must not
	// bunch: no 100 ms bucket holds more than twice the mean.
	tests := []struct {
		name  string
		p     Policy
		err   error
		first time.Duration // earliest allowed retry
	}{
		{"full jitter base 1s", Policy{Base: time.Second}, errOverloaded(0), 0},
		{"equal jitter base 2s", Policy{Base: 2 * time.Second, Jitter: EqualJitter}, errOverloaded(0), time.Second},
		{"decorrelated base 500ms", Policy{Base: 500 * time.Millisecond, Jitter: DecorrelatedJitter}, errOverloaded(0), 500 * time.Millisecond},
		{"pushback 2s", Policy{}, errOverloaded(2 * time.Second), 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			buckets := map[int]int{}
			for i := range 1000 {
				p := tt.p
				p.Budget = Unlimited()
				p.Rand = rand.New(rand.NewPCG(uint64(i), 99)).Uint64
				a := p.Begin(start, start.Add(time.Minute))
				wait, ok := a.Next(start, tt.err)
				if !ok {
					t.Fatalf("client %d: no retry: %v", i, a.Err())
				}
				if wait < tt.first {
					t.Fatalf("client %d: wait %v before %v", i, wait, tt.first)
				}
				buckets[int(wait/(100*time.Millisecond))]++
			}
			lo, hi := 1<<30, -1
			for b := range buckets {
				lo, hi = min(lo, b), max(hi, b)
			}
			mean := 1000 / float64(hi-lo+1)
			worst := 0
			for _, n := range buckets {
				worst = max(worst, n)
			}
			t.Logf("%d buckets of 100ms, mean %.1f, fullest %d", hi-lo+1, mean, worst)
			if float64(worst) > 2*mean {
				t.Errorf("fullest 100ms bucket holds %d retries, want ≤ 2× the mean %.1f", worst, mean)
			}
		})
	}
}

func TestJitterString(t *testing.T) {
	for j, want := range map[Jitter]string{FullJitter: "full", EqualJitter: "equal", DecorrelatedJitter: "decorrelated", NoJitter: "none", 9: "Jitter(9)"} {
		if got := j.String(); got != want {
			t.Errorf("Jitter(%d).String() = %q, want %q", j, got, want)
		}
	}
}

func FuzzBackoff(f *testing.F) {
	f.Add(int64(100e6), int64(10e9), 2.0, uint8(0), 3, int64(0), 0.5)
	f.Add(int64(3e9), int64(12e9), 2.0, uint8(3), 3, int64(0), 0.0)
	f.Add(int64(-1), int64(-1), -1.0, uint8(2), -5, int64(-7), 2.0)
	f.Add(int64(1<<62), int64(1<<62), 1e300, uint8(2), 1<<30, int64(1<<62), 0.999)
	f.Fuzz(func(t *testing.T, base, limit int64, mult float64, j uint8, n int, prev int64, u float64) {
		p := Policy{Base: time.Duration(base), Cap: time.Duration(limit), Multiplier: mult, Jitter: Jitter(j % 4)}
		got := p.Backoff(n, time.Duration(prev), u)
		if got < 0 || got > p.cap() {
			t.Fatalf("%+v.Backoff(%d, %d, %v) = %v, want in [0, %v]", p, n, prev, u, got, p.cap())
		}
		if c := p.Ceiling(n); c < 0 || c > p.cap() {
			t.Fatalf("%+v.Ceiling(%d) = %v, want in [0, %v]", p, n, c, p.cap())
		}
	})
}
