package hotpath

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sentinel "github.com/alibaba/sentinel-golang/api"
	"github.com/alibaba/sentinel-golang/core/base"
	sentinelconfig "github.com/alibaba/sentinel-golang/core/config"
	"github.com/alibaba/sentinel-golang/core/system"
	"github.com/alibaba/sentinel-golang/logging"
	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/adaptivethrottler"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"
	"github.com/go-kratos/aegis/circuitbreaker/sre"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"
	gclcore "github.com/platinummonkey/go-concurrency-limits/core"
	gcllimit "github.com/platinummonkey/go-concurrency-limits/limit"
	gcllimiter "github.com/platinummonkey/go-concurrency-limits/limiter"
	gclstrategy "github.com/platinummonkey/go-concurrency-limits/strategy"
	"golang.org/x/time/rate"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// sink keeps results alive so the compiler cannot drop the work.
var sink atomic.Uint64

// gauge is a levee.Signal set by hand.
type gauge struct{ v, target atomic.Uint64 }

func newGauge(v, target float64) *gauge {
	g := &gauge{}
	g.v.Store(math.Float64bits(v))
	g.target.Store(math.Float64bits(target))
	return g
}
func (g *gauge) Name() string    { return "cpu" }
func (g *gauge) Value() float64  { return math.Float64frombits(g.v.Load()) }
func (g *gauge) Target() float64 { return math.Float64frombits(g.target.Load()) }
func (g *gauge) set(v float64)   { g.v.Store(math.Float64bits(v)) }

// requestCtx is what a levee server hands admit: criticality, tenant and
// a deadline.
func requestCtx(b *testing.B) context.Context {
	ctx := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Critical, Tenant: "10.0.0.0/24"})
	ctx, cancel := context.WithTimeout(ctx, time.Hour)
	b.Cleanup(cancel)
	return ctx
}

// BenchmarkTimeNow is the yardstick: one bare time.Now().
func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	var n int64
	for i := 0; i < b.N; i++ {
		n += time.Now().UnixNano()
	}
	sink.Add(uint64(n))
}

// leveeAccept measures Admit, Ticket.Wait (the run queue, as leveehttp
// calls it) and Ticket.Done on a running controller whose signal reads v
// against a target of 0.8.
func leveeAccept(b *testing.B, v float64, parallel bool) {
	ctl := runningControllerAt(b, v)
	ctx := requestCtx(b)
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
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
		return
	}
	for i := 0; i < b.N; i++ {
		one()
	}
}

// BenchmarkAdmission: one admission decision, its run-queue slot and its
// completion report.
func BenchmarkAdmission(b *testing.B) {
	// "accept" is a server below half its target (the run queue off);
	// "accept-busy" one at 0.9 of it, not shedding (the run queue counts
	// its slots: two atomic additions).
	b.Run("levee/accept", func(b *testing.B) { leveeAccept(b, 0.3, false) })
	b.Run("levee/accept-parallel", func(b *testing.B) { leveeAccept(b, 0.3, true) })
	b.Run("levee/accept-busy", func(b *testing.B) { leveeAccept(b, 0.72, false) })
	b.Run("levee/accept-busy-parallel", func(b *testing.B) { leveeAccept(b, 0.72, true) })
	b.Run("levee/reject", func(b *testing.B) {
		ctl, ctx := sheddingController(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t, err := ctl.Admit(ctx)
			if err == nil {
				t.Done(nil)
			}
		}
	})

	b.Run("failsafe-adaptivelimiter/accept", func(b *testing.B) {
		l := adaptivelimiter.NewWithDefaults[any]()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			p, ok := l.TryAcquirePermit()
			if !ok {
				b.Fatal("rejected")
			}
			p.Record()
		}
	})
	b.Run("failsafe-adaptivelimiter/accept-parallel", func(b *testing.B) {
		l := adaptivelimiter.NewWithDefaults[any]()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if p, ok := l.TryAcquirePermit(); ok {
					p.Record()
				}
			}
		})
	})
	b.Run("failsafe-adaptivelimiter/reject", func(b *testing.B) {
		// A limit of one held by another caller: every acquire is refused.
		l := adaptivelimiter.NewBuilder[any]().WithLimits(1, 1, 1).Build()
		held, ok := l.TryAcquirePermit()
		if !ok {
			b.Fatal("could not hold the only permit")
		}
		defer held.Record()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if p, ok := l.TryAcquirePermit(); ok {
				p.Record()
			}
		}
	})

	b.Run("aegis-bbr/accept", func(b *testing.B) {
		l := bbr.NewLimiter()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			done, err := l.Allow()
			if err != nil {
				b.Fatal(err)
			}
			done(ratelimit.DoneInfo{})
		}
	})
	b.Run("aegis-bbr/accept-parallel", func(b *testing.B) {
		l := bbr.NewLimiter()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if done, err := l.Allow(); err == nil {
					done(ratelimit.DoneInfo{})
				}
			}
		})
	})
	b.Run("aegis-bbr/reject", func(b *testing.B) {
		// CPU threshold 0 puts BBR in its dropping state; two requests held in
		// flight exceed the max in-flight it derives from an empty history.
		l := bbr.NewLimiter(bbr.WithCPUThreshold(-1))
		var held []ratelimit.DoneFunc
		for i := 0; i < 4; i++ {
			if d, err := l.Allow(); err == nil {
				held = append(held, d)
			}
		}
		rejected := 0
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if done, err := l.Allow(); err == nil {
				done(ratelimit.DoneInfo{})
			} else {
				rejected++
			}
		}
		b.StopTimer()
		for _, d := range held {
			d(ratelimit.DoneInfo{})
		}
		if rejected < b.N/2 {
			b.Fatalf("aegis BBR rejected only %d of %d: not the reject path", rejected, b.N)
		}
	})

	b.Run("sentinel-system/accept", func(b *testing.B) {
		initSentinel(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			e, blk := sentinel.Entry("bench-accept", sentinel.WithTrafficType(base.Inbound))
			if blk != nil {
				b.Fatal(blk.Error())
			}
			e.Exit()
		}
	})

	b.Run("go-concurrency-limits/accept", func(b *testing.B) {
		l, err := gcllimiter.NewDefaultLimiterWithDefaults("bench",
			gclstrategy.NewSimpleStrategy(1000), gcllimit.NoopLimitLogger{}, gclcore.EmptyMetricRegistryInstance)
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			lst, ok := l.Acquire(ctx)
			if !ok {
				b.Fatal("rejected")
			}
			lst.OnSuccess()
		}
	})

	b.Run("x-time-rate/accept", func(b *testing.B) {
		l := rate.NewLimiter(rate.Limit(1e12), 1<<30)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if !l.Allow() {
				b.Fatal("rejected")
			}
		}
	})
}

// runningController returns a controller as a server runs it: with Run
// refreshing the coarse clock that Admit reads instead of calling
// time.Now (without Run, every Admit calls time.Now).
// runningControllerAt returns a controller driven by Run whose signal
// reads v against a target of 0.8.
//
// Its period is a minute: Run's first Step sets the state and its clock
// ticker runs, but no later Step reacts to the benchmark's own millions of
// arrivals a second, which a controller rightly takes for a flood (at 0.9
// of its target, degraded, it would bound them).
func runningControllerAt(b *testing.B, v float64) *admit.Controller {
	ctl := admit.New(admit.WithSignals(newGauge(v, 0.8)), admit.WithPeriod(time.Minute))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ctl.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	for ctl.Snapshot().Time.IsZero() {
		time.Sleep(time.Millisecond) // Run's first Step
	}
	return ctl
}

// sheddingController returns a controller that sheds every SHEDDABLE
// request and a context carrying such a request.
func sheddingController(b *testing.B) (*admit.Controller, context.Context) {
	g := newGauge(0.5, 0.8)
	// Without Run, Admit steps the controller itself once the last Step
	// is a period old, and says so once in the log: keep that quiet.
	ctl := admit.New(admit.WithSignals(g), admit.WithSeed(1), admit.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable, Tenant: "t"})
	crit := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Critical, Tenant: "t"})
	// On the real time scale: Admit (without Run) compares the clock with
	// the last Step, and would step at once after Steps on another scale.
	now := time.Now()
	// Offer 1000 requests a period, half SHEDDABLE, with the signal far
	// above target, until SHEDDABLE is fully shed.
	for step := 0; step < 400; step++ {
		g.set(1.6)
		for i := 0; i < 500; i++ {
			if t, err := ctl.AdmitAt(ctx, now); err == nil {
				t.DoneAt(now, nil)
			}
			if t, err := ctl.AdmitAt(crit, now); err == nil {
				t.DoneAt(now, nil)
			}
		}
		now = now.Add(admit.DefaultPeriod)
		ctl.Step(now)
		if ctl.Snapshot().ShedLevel >= 1 {
			break
		}
	}
	if lvl := ctl.Snapshot().ShedLevel; lvl < 1 {
		b.Fatalf("could not make the controller shed SHEDDABLE: shed level %.2f", lvl)
	}
	if _, err := ctl.Admit(ctx); err == nil {
		b.Fatal("SHEDDABLE request admitted: not the reject path")
	}
	return ctl, ctx
}

var sentinelOnce sync.Once

// quietLogger keeps sentinel's start-up chatter out of the benchmark output.
type quietLogger struct{}

func (quietLogger) Debug(string, ...interface{})        {}
func (quietLogger) DebugEnabled() bool                  { return false }
func (quietLogger) Info(string, ...interface{})         {}
func (quietLogger) InfoEnabled() bool                   { return false }
func (quietLogger) Warn(string, ...interface{})         {}
func (quietLogger) WarnEnabled() bool                   { return false }
func (quietLogger) Error(error, string, ...interface{}) {}
func (quietLogger) ErrorEnabled() bool                  { return false }

var _ logging.Logger = quietLogger{}

func initSentinel(b *testing.B) {
	sentinelOnce.Do(func() {
		conf := sentinelconfig.NewDefaultConfig()
		conf.Sentinel.Log.Logger = quietLogger{}
		conf.Sentinel.Log.Dir = b.TempDir()
		if err := sentinel.InitWithConfig(conf); err != nil {
			b.Fatal(err)
		}
		// The adaptive system rule the sentinel docs recommend for inbound
		// protection: BBR on CPU usage.
		if _, err := system.LoadRules([]*system.Rule{{MetricType: system.CpuUsage, TriggerCount: 0.8, Strategy: system.BBR}}); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkThrottle: one client-side throttling decision plus the success report.
func BenchmarkThrottle(b *testing.B) {
	b.Run("levee/allow", func(b *testing.B) {
		t := throttle.New()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := t.Allow(levee.Critical); err != nil {
				b.Fatal(err)
			}
			t.Done(levee.Critical, true)
		}
	})
	b.Run("levee/allow-parallel", func(b *testing.B) {
		t := throttle.New()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if t.Allow(levee.Critical) == nil {
					t.Done(levee.Critical, true)
				}
			}
		})
	})
	b.Run("failsafe-adaptivethrottler/allow", func(b *testing.B) {
		t := adaptivethrottler.NewWithDefaults[any]()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if !t.TryAcquirePermit() {
				b.Fatal("rejected")
			}
			t.RecordSuccess()
		}
	})
	b.Run("failsafe-adaptivethrottler/allow-parallel", func(b *testing.B) {
		t := adaptivethrottler.NewWithDefaults[any]()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if t.TryAcquirePermit() {
					t.RecordSuccess()
				}
			}
		})
	})
	b.Run("aegis-sre/allow", func(b *testing.B) {
		br := sre.NewBreaker()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := br.Allow(); err != nil {
				b.Fatal(err)
			}
			br.MarkSuccess()
		}
	})
	b.Run("aegis-sre/allow-parallel", func(b *testing.B) {
		br := sre.NewBreaker()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if br.Allow() == nil {
					br.MarkSuccess()
				}
			}
		})
	})
}

// failsafeBudget is the part of failsafe-go's budget its retry executor
// calls; the methods are exported on the type Build returns.
type failsafeBudget interface {
	TryAcquirePermit() bool
	ReleasePermit()
	RecordExecution()
	ReleaseExecution()
}

// BenchmarkRetryBudget: record one request and ask the budget for one retry.
func BenchmarkRetryBudget(b *testing.B) {
	b.Run("levee", func(b *testing.B) {
		bud := retry.NewBudget()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			bud.Request()
			if bud.TryRetry() {
				sink.Add(1)
			}
		}
	})
	b.Run("failsafe", func(b *testing.B) {
		bud, ok := fsbudget.New().(failsafeBudget)
		if !ok {
			b.Skip("failsafe-go's budget no longer exposes its permit methods")
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			bud.RecordExecution()
			if bud.TryAcquirePermit() {
				bud.ReleasePermit()
			}
			bud.ReleaseExecution()
		}
	})
}
