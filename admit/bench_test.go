package admit_test

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// fixedSignal is a signal set by hand.
type fixedSignal struct {
	v      atomic.Uint64 // value ×1e6
	target float64
}

func newFixedSignal(v, target float64) *fixedSignal {
	s := &fixedSignal{target: target}
	s.set(v)
	return s
}
func (s *fixedSignal) set(v float64)   { s.v.Store(uint64(v * 1e6)) }
func (s *fixedSignal) Name() string    { return "fixed" }
func (s *fixedSignal) Value() float64  { return float64(s.v.Load()) / 1e6 }
func (s *fixedSignal) Target() float64 { return s.target }

// acceptCtx carries criticality, tenant and a deadline, as a request
// through the HTTP adapter does.
func acceptCtx(tb testing.TB, c levee.Criticality) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	tb.Cleanup(cancel)
	return levee.WithCall(ctx, levee.Call{Criticality: c, Tenant: "tenant-0042"})
}

// overloaded returns a Controller, stepped on real time, that sheds all of
// SHEDDABLE and part of the levels above.
func overloaded(tb testing.TB) *admit.Controller {
	sig := newFixedSignal(0.4, 0.8)
	ctl := admit.New(admit.WithSignals(sig))
	now := time.Now()
	ctxs := make([]context.Context, levee.NumCriticalities)
	for c := range ctxs {
		ctxs[c] = levee.WithCall(context.Background(), levee.Call{Criticality: levee.Criticality(c), Tenant: "tenant-0042"})
	}
	for i := range 60 {
		if i == 20 {
			sig.set(1.2) // load 1.5
		}
		for range 50 {
			for _, ctx := range ctxs {
				if t, err := ctl.AdmitAt(ctx, now); err == nil {
					t.DoneAt(now, nil)
				}
			}
		}
		now = now.Add(50 * time.Millisecond)
		ctl.Step(now)
	}
	if _, err := ctl.Admit(ctxs[levee.Sheddable]); err == nil {
		tb.Fatalf("SHEDDABLE admitted at shed level %.2f; the reject benchmark needs it shed", ctl.Snapshot().ShedLevel)
	}
	return ctl
}

// running starts ctl's Run, as a server does (Admit then reads the coarse
// clock Run refreshes), until the benchmark ends. Benchmarks give their
// controllers a period of a minute (the longest): Run's first Step sets
// the state, its clock ticker runs, and no later Step within the
// benchmark reacts to its own millions of arrivals a second (a flood to
// the controller).
func running(b *testing.B, ctl *admit.Controller) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ctl.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	for ctl.Snapshot().Time.IsZero() {
		time.Sleep(time.Millisecond) // Run's first Step
	}
}

// BenchmarkAdmit: Admit, Ticket.Wait and Ticket.Done, as the adapters call
// them, on a controller driven by Run. "accept" is a server below half its
// targets (the run queue off); "accept-busy" one at 0.9 of its targets
// (not shedding; the run queue counts its slots).
func BenchmarkAdmit(b *testing.B) {
	accept := func(b *testing.B, load float64, parallel bool) {
		ctl := admit.New(admit.WithSignals(newFixedSignal(load*0.8, 0.8)), admit.WithPeriod(time.Minute))
		running(b, ctl)
		ctx := acceptCtx(b, levee.Critical)
		one := func() {
			t, err := ctl.Admit(ctx)
			if err == nil {
				err = t.Wait(ctx)
			}
			if err != nil {
				panic(err)
			}
			t.Done(nil)
		}
		b.ReportAllocs()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
				}
			})
			return
		}
		for b.Loop() {
			one()
		}
	}
	b.Run("accept", func(b *testing.B) { accept(b, 0.3, false) })
	b.Run("accept-parallel", func(b *testing.B) { accept(b, 0.3, true) })
	b.Run("accept-busy", func(b *testing.B) { accept(b, 0.9, false) })
	b.Run("accept-busy-parallel", func(b *testing.B) { accept(b, 0.9, true) })
	b.Run("reject", func(b *testing.B) {
		ctl := overloaded(b)
		ctx := acceptCtx(b, levee.Sheddable)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ctl.Admit(ctx); err == nil {
				b.Fatal("admitted")
			}
		}
	})
}

// BenchmarkTimeNow is the yardstick for BenchmarkAdmit: one bare time.Now
// measured in the same run.
func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	var sink int64
	for b.Loop() {
		sink += time.Now().UnixNano()
	}
	_ = sink
}

func TestAdmitDoesNotAllocate(t *testing.T) {
	// A period of a minute: Admit does not step these controllers while the
	// test runs (it would, a period after the last Step, without Run).
	accept := admit.New(admit.WithSignals(newFixedSignal(0.4, 0.8)), admit.WithPeriod(time.Minute))
	accept.Step(time.Now())
	busy := admit.New(admit.WithSignals(newFixedSignal(0.72, 0.8)), admit.WithPeriod(time.Minute))
	busy.Step(time.Now())
	shed := overloaded(t)
	route := admit.New(admit.WithRoute(func(context.Context) string { return "/v1/items" }), admit.WithPeriod(time.Minute))
	tests := []struct {
		name string
		ctl  *admit.Controller
		crit levee.Criticality
		ok   bool
		peer bool // an untrusted IPv6 caller: its prefixes are sampled and looked up
	}{
		{"accept", accept, levee.Critical, true, false},
		{"accept, busy (run queue counting)", busy, levee.Critical, true, false},
		{"accept with route", route, levee.CriticalPlus, true, false},
		{"accept, untrusted IPv6 peer", accept, levee.Critical, true, true},
		{"reject", shed, levee.Sheddable, false, false},
		{"reject, untrusted IPv6 peer", shed, levee.Sheddable, false, true},
	}
	for _, tt := range tests {
		ctx := acceptCtx(t, tt.crit)
		if tt.peer {
			call := levee.CallFrom(ctx)
			call.Peer = netip.MustParseAddr("2001:db8:1:2::3")
			call.Tenant = "2001:db8:1:2::/64"
			ctx = levee.WithCall(ctx, call)
		}
		got := testing.AllocsPerRun(1000, func() {
			tk, err := tt.ctl.Admit(ctx)
			if err == nil {
				err = tk.Wait(ctx)
			}
			if (err == nil) != tt.ok {
				t.Fatalf("%s: err = %v", tt.name, err)
			}
			tk.Done(nil)
		})
		if got != 0 {
			t.Errorf("%s: %v allocs per Admit+Wait+Done, want 0", tt.name, got)
		}
	}
}
