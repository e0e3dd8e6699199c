package admit_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
)

var t0 = time.Unix(1_700_000_000, 0)

func TestDegradePrecedesShedding(t *testing.T) {
	tests := []struct {
		name string
		rate func(time.Duration) float64
	}{
		{"step 0.5C to 5C", steps([]time.Duration{0, 3 * time.Second}, []float64{500, 5000})},
		{"ramp 0.5C to 3C over 5s", func(at time.Duration) float64 {
			x := min(max((at-2*time.Second).Seconds()/5, 0), 1)
			return 500 + x*2500
		}},
	}
	for _, tt := range tests {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed%d", tt.name, seed), func(t *testing.T) {
				p := newPlant(1000, seed)
				var firstDegrade, firstReject time.Duration = -1, -1
				var events []admit.EventKind
				ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed), admit.WithObserver(func(e admit.Event) {
					events = append(events, e.Kind)
					if e.Kind == admit.DegradeChanged && e.Snapshot.DegradeLevel > 0 && firstDegrade < 0 {
						firstDegrade = e.Time.Sub(t0)
					}
				}))
				s := &sim{ctl: ctl, p: p, srcs: []*source{{ctx: context.Background(), rate: tt.rate}}, t0: t0}
				s.onRej = func(at time.Duration, err error) {
					if firstReject < 0 {
						firstReject = at
					}
				}
				s.run(9*time.Second, time.Second)
				if firstDegrade < 0 || firstReject < 0 {
					t.Fatalf("first degrade at %v, first rejection at %v: want both", firstDegrade, firstReject)
				}
				if firstDegrade >= firstReject {
					t.Errorf("first degrade level > 0 at %v, first rejection at %v: want degrade strictly first", firstDegrade, firstReject)
				}
				if !slices.Contains(events, admit.OverloadStart) {
					t.Errorf("events %v: want an OverloadStart", events)
				}
			})
		}
	}
}

func TestForcedDegradeLevelExpires(t *testing.T) {
	var kinds []admit.EventKind
	ctl := admit.New(admit.WithObserver(func(e admit.Event) { kinds = append(kinds, e.Kind) }))
	ctl.Step(t0)
	ctl.Degrade().Force(2, t0.Add(time.Second))
	tests := []struct {
		at   time.Duration
		want degrade.Level
	}{
		{0, 2},
		{500 * time.Millisecond, 2},
		{999 * time.Millisecond, 2},
		{time.Second, 0},
		{2 * time.Second, 0},
	}
	for _, tt := range tests {
		now := t0.Add(tt.at)
		if tt.at > 0 {
			ctl.Step(now)
		}
		tk, err := ctl.AdmitAt(context.Background(), now)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.DegradeLevel(); got != tt.want {
			t.Errorf("at %v: ticket degrade level %d, want %d", tt.at, got, tt.want)
		}
		tk.DoneAt(now, nil)
	}
	want := []admit.EventKind{admit.DegradeChanged, admit.DrillStart, admit.DegradeChanged, admit.DrillEnd}
	if !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}
}

// TestRetryAfterFollowsRecovery repeats overload episodes of length D and
// checks the advice given during the last one is within 2× of D, and that
// SHEDDABLE_PLUS is told to wait longer than SHEDDABLE.
func TestRetryAfterFollowsRecovery(t *testing.T) {
	for _, d := range []time.Duration{time.Second, 10 * time.Second} {
		t.Run(d.String(), func(t *testing.T) {
			const quiet = 3 * time.Second
			cycle := quiet + d
			rate := func(at time.Duration) float64 {
				if at%cycle >= quiet {
					return 3000 / 4.0
				}
				return 500 / 4.0
			}
			p := newPlant(1000, 1)
			ctl := admit.New(admit.WithSignals(p))
			var srcs []*source
			for _, cr := range levee.Criticalities() {
				srcs = append(srcs, &source{ctx: critCtx(cr, ""), rate: rate})
			}
			s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
			// Probe the advice given to each criticality during the last
			// episode.
			var shed, shedPlus []time.Duration
			s.hook = func(at time.Duration, now time.Time) {
				if at < 2*cycle+quiet || at >= 3*cycle {
					return
				}
				for _, cr := range []levee.Criticality{levee.Sheddable, levee.SheddablePlus} {
					_, err := ctl.AdmitAt(critCtx(cr, ""), now)
					if re := levee.AsRejected(err); re != nil && re.Reason == levee.Overloaded {
						if cr == levee.Sheddable {
							shed = append(shed, re.RetryAfter)
						} else {
							shedPlus = append(shedPlus, re.RetryAfter)
						}
					}
				}
			}
			s.run(3*cycle, time.Second)
			if len(shed) == 0 || len(shedPlus) == 0 {
				t.Fatalf("no overload rejections in the last episode")
			}
			slices.Sort(shed)
			med := shed[len(shed)/2]
			t.Logf("episode %v: median Retry-After %v (min %v, max %v), SHEDDABLE_PLUS median %v", d, med, shed[0], shed[len(shed)-1], shedPlus[len(shedPlus)/2])
			if med < d/2 || med > 2*d {
				t.Errorf("median Retry-After %v for %v episodes, want within 2×", med, d)
			}
			if sp := shedPlus[len(shedPlus)/2]; sp <= med {
				t.Errorf("SHEDDABLE_PLUS Retry-After %v, want longer than SHEDDABLE's %v", sp, med)
			}
		})
	}
}

func TestNoRetryAtHighRetryShare(t *testing.T) {
	tests := []struct {
		share float64
		want  bool
	}{{0.05, false}, {0.15, false}, {0.3, true}, {0.6, true}}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.share), func(t *testing.T) {
			p := newPlant(1000, 2)
			ctl := admit.New(admit.WithSignals(p))
			first := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable})
			retry := levee.WithCall(context.Background(), levee.Call{Criticality: levee.Sheddable, Attempt: 1})
			var noRetry, rejections int
			s := &sim{ctl: ctl, p: p, t0: t0, srcs: []*source{
				{ctx: first, rate: constant(3000 * (1 - tt.share))},
				{ctx: retry, rate: constant(3000 * tt.share)},
			}}
			s.onRej = func(at time.Duration, err error) {
				if at < 15*time.Second {
					return
				}
				rejections++
				if re := levee.AsRejected(err); re != nil && re.NoRetry {
					noRetry++
				}
			}
			s.run(20*time.Second, time.Second)
			snap := ctl.Snapshot()
			if snap.NoRetry != tt.want {
				t.Errorf("retry share %.2f (measured %.3f): NoRetry = %v, want %v", tt.share, snap.RetryShare, snap.NoRetry, tt.want)
			}
			if got := noRetry == rejections && rejections > 0; got != tt.want {
				t.Errorf("%d of %d overload rejections said no-retry, want all = %v", noRetry, rejections, tt.want)
			}
		})
	}
}

func TestQuota(t *testing.T) {
	ctl := admit.New(
		admit.WithQuota("q", admit.Quota{Rate: 100, Burst: 10}),
		admit.WithQuota("p", admit.Quota{ByCriticality: [levee.NumCriticalities]admit.Limit{levee.Sheddable: {Rate: 10, Burst: 1}}}),
	)
	tests := []struct {
		tenant  string
		crit    levee.Criticality
		rate    float64 // per second, over 5 s
		wantMin int
		wantMax int
	}{
		{"q", levee.Critical, 300, 500, 515},
		{"q-unlisted", levee.Critical, 300, 1500, 1500},
		{"p", levee.Sheddable, 100, 49, 52},
		{"p", levee.Critical, 100, 500, 500},
	}
	for _, tt := range tests {
		ctx := critCtx(tt.crit, tt.tenant)
		n := int(tt.rate * 5)
		admitted := 0
		for i := range n {
			now := t0.Add(time.Duration(float64(i) / tt.rate * float64(time.Second)))
			tk, err := ctl.AdmitAt(ctx, now)
			if err == nil {
				admitted++
				tk.DoneAt(now, nil)
				continue
			}
			re := levee.AsRejected(err)
			if re == nil || re.Reason != levee.Quota || re.RetryAfter <= 0 || re.RetryAfter > 200*time.Millisecond {
				t.Fatalf("%s/%v: err %v, want a quota rejection with a RetryAfter in (0, 200ms]", tt.tenant, tt.crit, err)
			}
		}
		if admitted < tt.wantMin || admitted > tt.wantMax {
			t.Errorf("%s/%v at %v/s for 5s: admitted %d, want %d..%d", tt.tenant, tt.crit, tt.rate, admitted, tt.wantMin, tt.wantMax)
		}
	}
	t0 := t0.Add(time.Hour) // buckets full again
	ctx := critCtx(levee.Critical, "q")
	var last *levee.RejectedError
	for i := range 20 {
		if _, err := ctl.AdmitAt(ctx, t0); err != nil {
			last = levee.AsRejected(err)
			if i < 10 {
				t.Errorf("request %d of a burst of 10 rejected", i)
			}
		}
	}
	if last == nil || last.RetryAfter < 9*time.Millisecond || last.RetryAfter > 12*time.Millisecond {
		t.Errorf("after the burst: %v, want Retry-After ≈ 10ms (one token at 100/s)", last)
	}
}

func TestDeadlines(t *testing.T) {
	routeKey := struct{}{}
	ctl := admit.New(admit.WithRoute(func(ctx context.Context) string {
		s, _ := ctx.Value(routeKey).(string)
		return s
	}))
	slow := context.WithValue(context.Background(), routeKey, "/slow")
	fast := context.WithValue(context.Background(), routeKey, "/fast")
	// Real deadlines are compared with the virtual now: start near the
	// real time so that the contexts' own timers do not fire first.
	now := time.Now()
	for range 2000 { // teach: /slow takes 200ms, /fast 1ms
		for _, c := range []struct {
			ctx context.Context
			d   time.Duration
		}{{slow, 200 * time.Millisecond}, {fast, time.Millisecond}} {
			tk, err := ctl.AdmitAt(c.ctx, now)
			if err != nil {
				t.Fatal(err)
			}
			tk.DoneAt(now.Add(c.d), nil)
		}
		now = now.Add(time.Millisecond)
	}
	cancelled, cancel := context.WithCancel(fast)
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		left time.Duration // 0: no deadline
		want error
	}{
		{"no deadline", slow, 0, nil},
		{"caller gone", cancelled, 0, levee.ErrDeadline},
		{"deadline passed", fast, -time.Millisecond, levee.ErrDeadline},
		{"slow route, 100ms left", slow, 100 * time.Millisecond, levee.ErrDeadline},
		{"slow route, 300ms left", slow, 300 * time.Millisecond, nil},
		{"fast route, 100ms left", fast, 100 * time.Millisecond, nil},
		{"unknown route, 1ms left", context.Background(), time.Millisecond, nil},
	}
	// One request in 16 that cannot meet its deadline is admitted as a
	// probe (it heals a wrong estimate): of 32, at most 2 get through.
	for _, tt := range tests {
		ctx := tt.ctx
		if tt.left != 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, now.Add(tt.left))
			defer cancel()
		}
		admitted := 0
		for range 32 {
			tk, err := ctl.AdmitAt(ctx, now)
			if err == nil {
				admitted++
				tk.DoneAt(now, context.DeadlineExceeded) // a probe that failed teaches nothing
				continue
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("%s: err %v, want %v", tt.name, err, tt.want)
			}
			if re := levee.AsRejected(err); re != nil && !re.NoRetry {
				t.Errorf("%s: deadline rejection without NoRetry", tt.name)
			}
		}
		if tt.want == nil && admitted != 32 {
			t.Errorf("%s: admitted %d of 32, want all", tt.name, admitted)
		}
		if tt.want != nil && admitted > 32/16 {
			t.Errorf("%s: admitted %d of 32, want at most the probes (2)", tt.name, admitted)
		}
	}
	ctl.Step(now)
	if got := ctl.Snapshot().Routes; got != 2 {
		t.Errorf("routes learned = %d, want 2", got)
	}
}

func TestDone(t *testing.T) {
	ctl := admit.New()
	var zero admit.Ticket
	zero.Done(nil) // no-op
	tk, err := ctl.AdmitAt(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	down := &levee.RejectedError{Reason: levee.Overloaded}
	tk.DoneAt(t0, fmt.Errorf("backend: %w", down))
	tk.DoneAt(t0, down)
	tk.Done(down)
	tk2, _ := ctl.AdmitAt(context.Background(), t0)
	tk2.DoneAt(t0, context.Canceled)
	s := ctl.Snapshot()
	if s.DownstreamOverloaded != 1 || s.CallerGone != 1 {
		t.Errorf("DownstreamOverloaded %d, CallerGone %d; want 1, 1 (Done is idempotent)", s.DownstreamOverloaded, s.CallerGone)
	}
	if s.Admitted[levee.Critical] != 2 {
		t.Errorf("Admitted[CRITICAL] = %d, want 2", s.Admitted[levee.Critical])
	}
}

func TestDeterministicForSeed(t *testing.T) {
	run := func() admit.Snapshot {
		p := newPlant(1000, 9)
		ctl := admit.New(admit.WithSignals(p), admit.WithSeed(9))
		var srcs []*source
		for i, cr := range levee.Criticalities() {
			srcs = append(srcs, &source{ctx: critCtx(cr, fmt.Sprint("t", i)), rate: constant(800)})
		}
		s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
		s.run(5*time.Second, time.Second)
		return ctl.Snapshot()
	}
	a, b := run(), run()
	if a.Admitted != b.Admitted || a.Rejected != b.Rejected || a.ShedLevel != b.ShedLevel {
		t.Errorf("two runs with one seed differ:\n%v %v %v\n%v %v %v", a.Admitted, a.Rejected, a.ShedLevel, b.Admitted, b.Rejected, b.ShedLevel)
	}
}

func TestLoggerLogsStateChangesOnce(t *testing.T) {
	var buf bytes.Buffer
	p := newPlant(1000, 3)
	ctl := admit.New(admit.WithSignals(p), admit.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	s := &sim{ctl: ctl, p: p, t0: t0, srcs: []*source{{ctx: context.Background(), rate: steps([]time.Duration{0, 2 * time.Second, 8 * time.Second}, []float64{500, 3000, 500})}}}
	s.run(12*time.Second, time.Second)
	out := buf.String()
	if got := strings.Count(out, "overloaded, shedding"); got != 1 {
		t.Errorf("overload start logged %d times, want 1:\n%s", got, out)
	}
	if got := strings.Count(out, "overload over"); got != 1 {
		t.Errorf("overload end logged %d times, want 1:\n%s", got, out)
	}
	if n := strings.Count(out, "\n"); n > 12 {
		t.Errorf("%d log lines for one episode, want few:\n%s", n, out)
	}
}
