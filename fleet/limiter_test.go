package fleet

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string // substring of the error; "" for none
	}{
		{"zero", Config{}, ""},
		{"listed", Config{Tenants: map[string]Quota{"a": {Cores: 2, BurstCoreSeconds: 4}}, Default: Quota{Cores: 1}}, ""},
		{"empty name", Config{Tenants: map[string]Quota{"": {Cores: 1}}}, "empty tenant name"},
		{"zero cores", Config{Tenants: map[string]Quota{"a": {}}}, `tenant "a": cores = 0`},
		{"NaN cores", Config{Tenants: map[string]Quota{"a": {Cores: math.NaN()}}}, "cores = NaN"},
		{"huge cores", Config{Tenants: map[string]Quota{"a": {Cores: 2e6}}}, "cores = 2e+06"},
		{"negative burst", Config{Tenants: map[string]Quota{"a": {Cores: 1, BurstCoreSeconds: -1}}}, "burst_core_seconds = -1"},
		{"burst over an hour", Config{Tenants: map[string]Quota{"a": {Cores: 1, BurstCoreSeconds: 3601}}}, "burst_core_seconds = 3601"},
		{"default burst without cores", Config{Default: Quota{BurstCoreSeconds: 1}}, "default: cores = 0"},
		{"bad UTF-8", Config{Tenants: map[string]Quota{"\xff": {Cores: 1}}}, "not valid UTF-8"},
		{"long name", Config{Tenants: map[string]Quota{strings.Repeat("x", 300): {Cores: 1}}}, "longer than 256"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrConfig)):
			t.Errorf("%s: err = %v, want ErrConfig mentioning %q", tt.name, err, tt.want)
		}
	}
}

func TestOptionsRefuseBadValues(t *testing.T) {
	tests := []struct {
		name string
		opts []Option
	}{
		{"period too short", []Option{WithPeriod(time.Millisecond)}},
		{"TTL below two periods", []Option{WithPeriod(time.Second), WithLeaseTTL(time.Second)}},
		{"timeout above the period", []Option{WithExchangeTimeout(2 * time.Second)}},
		{"no instances", []Option{WithInitialInstances(0)}},
		{"instance with a space", []Option{WithInstance("a b")}},
		{"instance _", []Option{WithInstance("_")}},
	}
	for _, tt := range tests {
		if _, err := New(Config{}, tt.opts...); err == nil {
			t.Errorf("%s: New succeeded, want an error", tt.name)
		}
	}
}

// admitFor calls Allow every step from now for d, and returns how many
// were admitted.
func admitFor(l *Limiter, tenant string, c levee.Criticality, now time.Time, d, step time.Duration) (int, time.Time) {
	n := 0
	for end := now.Add(d); now.Before(end); now = now.Add(step) {
		if _, ok := l.Allow(tenant, c, now); ok {
			n++
		}
	}
	return n, now
}

func TestSheddableRefusedFirst(t *testing.T) {
	// A tenant at its limit: its SHEDDABLE requests have a quarter of the
	// burst, so once the bucket holds more debt than that they are
	// refused while CRITICAL ones go on at the rate.
	l, err := New(Config{Tenants: map[string]Quota{"t": {Cores: 1, BurstCoreSeconds: 1}}}, WithCPU(nil))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	// Before any exchange the instance holds the whole quota, 1 core; at
	// the default 1 ms per request that is a request per ms. Spend half
	// the burst.
	n, now := admitFor(l, "t", levee.Critical, now, 0, time.Millisecond)
	for range 500 {
		if _, ok := l.Allow("t", levee.Critical, now); ok {
			n++
		}
	}
	if n != 500 {
		t.Fatalf("admitted %d of 500 within the burst, want 500", n)
	}
	if _, ok := l.Allow("t", levee.Sheddable, now); ok {
		t.Errorf("SHEDDABLE admitted with half the burst spent, want refused")
	}
	if _, ok := l.Allow("t", levee.SheddablePlus, now); !ok {
		t.Errorf("SHEDDABLE_PLUS refused with half the burst spent (its tolerance), want admitted")
	}
	if _, ok := l.Allow("t", levee.CriticalPlus, now); !ok {
		t.Errorf("CRITICAL_PLUS refused within the burst, want admitted")
	}
	// Offered at twice the rate for a second: CRITICAL gets the rest of
	// the burst (500) and the rate (1000).
	crit, _ := admitFor(l, "t", levee.Critical, now, time.Second, 500*time.Microsecond)
	if crit < 1490 || crit > 1510 {
		t.Errorf("CRITICAL at 2x the rate: %d admitted in 1 s, want about 1500", crit)
	}
}

func TestUpdate(t *testing.T) {
	l, err := New(Config{Tenants: map[string]Quota{"a": {Cores: 1}, "b": {Cores: 1}}}, WithCPU(nil))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(100, 0)
	store := NewMemStore(func() time.Time { return now })
	round := func() {
		r := l.BeginRound(now)
		l.FinishRound(now, r, store.Exchange(context.Background(), r))
		now = now.Add(time.Second)
	}
	l.Charge("a", "r", time.Millisecond)
	round()
	if err := l.Update(Config{Tenants: map[string]Quota{"a": {Cores: -1}}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("Update with a negative quota: %v, want ErrConfig", err)
	}
	if s := l.Snapshot(); len(s.Tenants) != 3 {
		t.Fatalf("after a refused update: %d entries, want the old 3", len(s.Tenants))
	}
	before, _ := l.Snapshot().Tenant("a")
	if err := l.Update(Config{Tenants: map[string]Quota{"a": {Cores: 0.5}}, Default: Quota{Cores: 2}}); err != nil {
		t.Fatal(err)
	}
	s := l.Snapshot()
	a, _ := s.Tenant("a")
	d, _ := s.Tenant("")
	if _, ok := s.Tenant("b"); ok {
		t.Errorf("b still listed after it was removed")
	}
	if a.QuotaCores != 0.5 || a.LeaseCores != before.LeaseCores/2 || a.CostCoreSeconds != before.CostCoreSeconds {
		t.Errorf("a after the update: quota %v lease %v cost %v; want 0.5, %v (halved at once), %v (kept)",
			a.QuotaCores, a.LeaseCores, a.CostCoreSeconds, before.LeaseCores/2, before.CostCoreSeconds)
	}
	if d.QuotaCores != 2 || d.State != Local {
		t.Errorf("default pool: quota %v state %v, want 2 local", d.QuotaCores, d.State)
	}
	// b now draws on the default pool.
	if _, ok := l.Allow("b", levee.Critical, now); !ok {
		t.Errorf("b refused from a fresh default pool")
	}
	round()
	round()
	s = l.Snapshot()
	if d, _ := s.Tenant(""); d.Admitted != 1 {
		t.Errorf("default pool admitted %d, want b's 1", d.Admitted)
	}
}

func TestUnlimitedWithoutDefault(t *testing.T) {
	l, err := New(Config{Tenants: map[string]Quota{"a": {Cores: 0.001}}}, WithCPU(nil))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := admitFor(l, "somebody", levee.Sheddable, time.Unix(1, 0), time.Second, time.Microsecond)
	if n != 1_000_000 {
		t.Errorf("a tenant not listed, no default quota: %d of 1000000 admitted, want all", n)
	}
}

func TestMemStoreNeverGrantsAboveQuota(t *testing.T) {
	now := time.Unix(0, 0)
	m := NewMemStore(func() time.Time { return now })
	rng := rand.New(rand.NewPCG(1, 2))
	const q = 0.3
	for i := range 5000 {
		now = now.Add(time.Duration(rng.IntN(300)) * time.Millisecond)
		id := string(rune('a' + rng.IntN(8)))
		c := Claim{Tenant: "t", Quota: q, Wants: rng.Float64(), Target: rng.Float64() * 0.4, Usage: rng.Float64() * 0.1, Release: rng.IntN(20) == 0}
		r := &Round{Instance: id, TTL: 3 * time.Second, Claims: []Claim{c}}
		if err := m.Exchange(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		g := r.Grants[0]
		if g.SumHas > q+1e-9 || g.Has > c.Target+1e-6 || g.Has < 0 {
			t.Fatalf("exchange %d: has %.6f (target %.6f), leases sum to %.6f; want has ≤ target and sum ≤ %v", i, g.Has, c.Target, g.SumHas, q)
		}
		var sum float64
		if p := m.pools[poolKey{tenant: "t"}]; p != nil {
			for _, e := range p.e {
				sum += FromMicro(e.h)
			}
		}
		if math.Abs(sum-g.SumHas) > 1e-9 {
			t.Fatalf("exchange %d: kept sum %.6f, entries sum to %.6f", i, g.SumHas, sum)
		}
	}
}
