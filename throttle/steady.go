package throttle

import (
	"math/rand/v2"
	"time"

	"github.com/levee-dev/levee"
)

// Steady describes a throttled client facing an overloaded backend, as
// ratios: Received is what reaches the backend per unit of its capacity
// (the SRE book's K·A over A), LocalReject the share of the client's
// requests rejected locally, BackendReject the share of the requests
// reaching the backend that it rejects.
type Steady struct {
	Received      float64
	LocalReject   float64
	BackendReject float64
}

// Formula returns the SRE formula's steady state for a client offering
// load times the backend's capacity (load > 0) with constant K (values
// below 1 count as 1), ignoring the formula's +1: the backend receives
// min(load, K) capacities, the client rejects 1 − K/load locally, and the
// backend rejects 1 − 1/received of what it receives.
func Formula(k, load float64) Steady {
	k = max(k, 1)
	if !(load > 0) {
		return Steady{}
	}
	recv := min(load, k)
	s := Steady{Received: recv, LocalReject: 1 - recv/load}
	if recv > 1 {
		s.BackendReject = 1 - 1/recv
	}
	return s
}

// Scenario is a virtual-time run of one Throttle in front of a backend that
// accepts Capacity requests per second (a token bucket holding at most
// Burst of capacity) and rejects the rest as overloaded. The client offers
// Load×Capacity requests per second, evenly spaced or as a Poisson process,
// all of criticality Critical, and responses arrive at once.
type Scenario struct {
	// K is the throttle's K; 0 means DefaultK. Out of WithK's range
	// Simulate panics, as New does.
	K float64
	// Load is the offered rate over the capacity; 0 means 10.
	Load float64
	// Capacity in requests per second; 0 means 100.
	Capacity float64
	// Warmup is run first and not measured; 0 means 3 minutes (the long
	// window must fill).
	Warmup time.Duration
	// Measure is the measured span after the warmup; 0 means 5 minutes.
	Measure time.Duration
	// Burst is the depth of the backend's token bucket in time at
	// Capacity (at least one request); 0 means 1 s.
	Burst time.Duration
	// Poisson makes arrivals a Poisson process (exponential gaps drawn from
	// a source seeded with Seed) instead of evenly spaced.
	Poisson bool
	// Seed seeds the throttle (WithSeed) and the Poisson arrivals.
	Seed uint64
	// Options are further throttle options, applied after K and Seed.
	Options []Option
}

// Simulate runs the scenario on virtual time with the real Throttle and
// returns the measured steady state. It is deterministic: the same
// Scenario gives the same result. Compare with Formula(s.K, s.Load).
func Simulate(s Scenario) Steady {
	if s.K == 0 {
		s.K = DefaultK
	}
	if s.Load <= 0 {
		s.Load = 10
	}
	if s.Capacity <= 0 {
		s.Capacity = 100
	}
	if s.Warmup <= 0 {
		s.Warmup = 3 * time.Minute
	}
	if s.Measure <= 0 {
		s.Measure = 5 * time.Minute
	}
	t := New(append([]Option{WithK(s.K), WithSeed(s.Seed)}, s.Options...)...)
	if s.Burst <= 0 {
		s.Burst = time.Second
	}
	b := newBucket(s.Capacity, s.Burst)
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	gap := time.Duration(float64(time.Second) / (s.Load * s.Capacity))
	var offered, sent, accepted float64
	end := s.Warmup + s.Measure
	var rng *rand.Rand
	if s.Poisson {
		rng = rand.New(rand.NewPCG(s.Seed, 0x5eed))
	}
	for at := time.Duration(0); at < end; at += gap {
		if rng != nil {
			gap = time.Duration(rng.ExpFloat64() * float64(time.Second) / (s.Load * s.Capacity))
		}
		now := start.Add(at)
		measured := at >= s.Warmup
		if measured {
			offered++
		}
		if t.AllowAt(now, levee.Critical) != nil {
			continue
		}
		if measured {
			sent++
		}
		ok := b.take(at)
		t.DoneAt(now, levee.Critical, ok)
		if ok && measured {
			accepted++
		}
	}
	capacity := s.Capacity * s.Measure.Seconds()
	st := Steady{Received: sent / capacity, LocalReject: 1 - sent/offered}
	if sent > 0 {
		st.BackendReject = 1 - accepted/sent
	}
	return st
}

// bucket is the scenario's backend: a token bucket on virtual time.
type bucket struct {
	rate, tokens, burst float64
	last                time.Duration
}

func newBucket(rate float64, depth time.Duration) *bucket {
	burst := max(rate*depth.Seconds(), 1)
	return &bucket{rate: rate, tokens: burst, burst: burst}
}

func (b *bucket) take(at time.Duration) bool {
	b.tokens = min(b.burst, b.tokens+(at-b.last).Seconds()*b.rate)
	b.last = at
	if b.tokens >= 1 {
		b.tokens--
		return true
	}
	return false
}
