package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/fleet"
)

// idle is a signal well below its target: the accept path, nothing shed.
type idle struct{}

func (idle) Name() string    { return "idle" }
func (idle) Value() float64  { return 0.3 }
func (idle) Target() float64 { return 0.8 }

// acceptControllers returns a Controller without quotas and one whose
// tenant is under a fleet quota it never reaches, as a server builds them.
func acceptControllers(tb testing.TB) (none, quota *admit.Controller, ctx context.Context) {
	l, err := fleet.New(fleet.Config{
		Tenants: map[string]fleet.Quota{"tenant-0042": {Cores: 1e5}},
		Default: fleet.Quota{Cores: 1, BurstCoreSeconds: 1},
	}, fleet.WithCPU(nil))
	if err != nil {
		tb.Fatal(err)
	}
	none = admit.New(admit.WithSignals(idle{}))
	quota = admit.New(admit.WithSignals(idle{}), admit.WithTenantLimiter(l))
	none.Step(time.Now())
	quota.Step(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	tb.Cleanup(cancel)
	return none, quota, levee.WithCall(ctx, levee.Call{Tenant: "tenant-0042"})
}

// acceptOnce is what an adapter does for one admitted request: Admit,
// Wait, Done.
func acceptOnce(ctx context.Context, c *admit.Controller) {
	t, err := c.Admit(ctx)
	if err == nil {
		err = t.Wait(ctx)
	}
	if err != nil {
		panic(err)
	}
	t.Done(nil)
}

// BenchmarkAccept: Admit, Wait and Done of one admitted request, without
// quotas ("none") and under a fleet quota ("fleet"), in the same run.
func BenchmarkAccept(b *testing.B) {
	none, quota, ctx := acceptControllers(b)
	one := func(c *admit.Controller) { acceptOnce(ctx, c) }
	for _, bc := range []struct {
		name string
		c    *admit.Controller
	}{{"none", none}, {"fleet", quota}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				one(bc.c)
			}
		})
		b.Run(bc.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one(bc.c)
				}
			})
		})
	}
}

// BenchmarkAcceptRatio alternates blocks of 256 accepts without quotas
// and under a fleet quota, so that both see the same machine at the same
// moments, and reports each one's ns per accept and their ratio (the
// acceptance bound is 2).
func BenchmarkAcceptRatio(b *testing.B) {
	none, quota, ctx := acceptControllers(b)
	block := func(c *admit.Controller) time.Duration {
		start := time.Now()
		for range 256 {
			acceptOnce(ctx, c)
		}
		return time.Since(start)
	}
	var tn, tq time.Duration
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			tn += block(none)
			tq += block(quota)
		} else {
			tq += block(quota)
			tn += block(none)
		}
	}
	n := float64(b.N) * 256
	b.ReportMetric(float64(tn)/n, "none-ns/accept")
	b.ReportMetric(float64(tq)/n, "fleet-ns/accept")
	b.ReportMetric(float64(tq)/float64(tn), "ratio")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkAllow is the fleet limiter's own accept path.
func BenchmarkAllow(b *testing.B) {
	l, err := fleet.New(fleet.Config{Tenants: map[string]fleet.Quota{"tenant-0042": {Cores: 1e5}}}, fleet.WithCPU(nil))
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := l.Allow("tenant-0042", levee.Critical, now); !ok {
				panic("refused")
			}
		}
	})
}

// BenchmarkSpan is the meter's per-request cost: Start and End.
func BenchmarkSpan(b *testing.B) {
	l, err := fleet.New(fleet.Config{Tenants: map[string]fleet.Quota{"tenant-0042": {Cores: 1}}}, fleet.WithCPU(nil))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Start("tenant-0042", "GET /v1/items/{id}").End()
		}
	})
}

func TestAcceptWithFleetQuotaDoesNotAllocate(t *testing.T) {
	_, quota, ctx := acceptControllers(t)
	refused := levee.WithCall(ctx, levee.Call{Tenant: "unknown"})
	// One instant for every call, so that the refusal holds: on the real
	// clock the default pool (1 core) refills a request's cost every
	// millisecond or so, and the refused case would be admitted now and
	// then.
	at := time.Now()
	for range 2000 {
		if tk, err := quota.AdmitAt(refused, at); err == nil {
			tk.DoneAt(at, nil)
		}
	}
	tests := []struct {
		name string
		ctx  context.Context
		ok   bool
	}{{"admitted", ctx, true}, {"refused by the fleet quota", refused, false}}
	for _, tt := range tests {
		got := testing.AllocsPerRun(1000, func() {
			tk, err := quota.AdmitAt(tt.ctx, at)
			if (err == nil) != tt.ok {
				t.Fatalf("%s: err = %v", tt.name, err)
			}
			tk.DoneAt(at, nil)
		})
		if got != 0 {
			t.Errorf("%s: %v allocs per Admit+Done, want 0", tt.name, got)
		}
	}
}
