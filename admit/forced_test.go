package admit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// rejectedShares admits n requests of each criticality at now and returns
// the share rejected as Overloaded, by rank.
func rejectedShares(t *testing.T, ctl *admit.Controller, now time.Time, n int) (out [levee.NumCriticalities]float64) {
	t.Helper()
	for i := range n {
		for r, cr := range levee.Criticalities() {
			ctx := levee.WithCall(context.Background(), levee.Call{Criticality: cr, Tenant: fmt.Sprint("t", i%50)})
			tk, err := ctl.AdmitAt(ctx, now)
			if err != nil {
				if !errors.Is(err, levee.ErrOverloaded) {
					t.Fatalf("%v: %v, want an overload rejection", cr, err)
				}
				out[r]++
				continue
			}
			tk.DoneAt(now, nil)
		}
	}
	for r := range out {
		out[r] /= float64(n)
	}
	return out
}

// TestForceShed: a forced level sheds by criticality, lowest first,
// whatever the signals say, from the next Admit until the first Step at
// or after its expiry, and ends at once when cleared.
func TestForceShed(t *testing.T) {
	sig := newFixedSignal(0.2, 0.8) // quiet: nothing shed of itself
	var kinds []admit.EventKind
	ctl := admit.New(admit.WithSignals(sig), admit.WithObserver(func(e admit.Event) { kinds = append(kinds, e.Kind) }))
	period := admit.DefaultPeriod
	now := t0
	ctl.Step(now)
	until := now.Add(time.Second)
	ctl.ForceShed(1.5, until)

	if l, u, ok := ctl.ForcedShed(now); !ok || l != 1.5 || !u.Equal(until) {
		t.Errorf("ForcedShed = %v, %v, %v; want 1.5, %v, true", l, u, ok, until)
	}
	want := [4]float64{1, 0.5, 0, 0}
	for _, step := range []bool{false, true} { // at once, and after the next Step
		if step {
			now = now.Add(period)
			ctl.Step(now)
		}
		got := rejectedShares(t, ctl, now, 2000)
		for r := range got {
			if math.Abs(got[r]-want[r]) > 0.01 {
				t.Errorf("forced 1.5, after a Step %v: rank %d (%v) rejected %.3f, want %.2f", step, r, levee.FromRank(r), got[r], want[r])
			}
		}
	}
	s := ctl.Snapshot()
	if s.ForcedShed != 1.5 || !s.ForcedShedUntil.Equal(until) || s.ShedLevel != 1.5 || s.Overloaded {
		t.Errorf("snapshot: forced %v until %v, shed level %v, overloaded %v; want 1.5, %v, 1.5, false",
			s.ForcedShed, s.ForcedShedUntil, s.ShedLevel, s.Overloaded, until)
	}

	// Renewed before it expires (as an overload manager does): one drill.
	until = now.Add(3 * period)
	ctl.ForceShed(3, until)
	now = now.Add(period)
	ctl.Step(now)
	if got := rejectedShares(t, ctl, now, 400); got != ([4]float64{1, 1, 1, 0}) {
		t.Errorf("forced 3: rejected %v, want SHEDDABLE, SHEDDABLE_PLUS and CRITICAL", got)
	}
	// Not renewed: the first Step at or after until ends it.
	for now.Before(until.Add(-period)) {
		now = now.Add(period)
		ctl.Step(now)
	}
	if _, _, ok := ctl.ForcedShed(now); !ok {
		t.Error("ForcedShed ended before its expiry")
	}
	now = until
	ctl.Step(now)
	if got := rejectedShares(t, ctl, now, 400); got != ([4]float64{}) {
		t.Errorf("at the expiry: rejected %v, want nothing", got)
	}
	if _, _, ok := ctl.ForcedShed(now); ok {
		t.Error("ForcedShed still in force at its expiry")
	}
	if s := ctl.Snapshot(); s.ForcedShed != 0 || !s.ForcedShedUntil.IsZero() || s.ShedLevel != 0 {
		t.Errorf("after the expiry: forced %v until %v, shed level %v; want 0", s.ForcedShed, s.ForcedShedUntil, s.ShedLevel)
	}
	if want := []admit.EventKind{admit.ForcedShedStart, admit.ForcedShedEnd}; !slices.Equal(kinds, want) {
		t.Errorf("events %v, want %v", kinds, want)
	}

	// Cleared by hand; bad levels.
	for _, tc := range []struct {
		level float64
		until time.Time
		want  [4]float64
	}{
		{4, now.Add(time.Minute), [4]float64{1, 1, 1, 1}},
		{math.Inf(1), now.Add(time.Minute), [4]float64{1, 1, 1, 1}},
		{0, now.Add(time.Minute), [4]float64{}},
		{-1, now.Add(time.Minute), [4]float64{}},
		{math.NaN(), now.Add(time.Minute), [4]float64{}},
		{2, time.Time{}, [4]float64{}},
		{2, now.Add(-time.Second), [4]float64{}}, // already expired
	} {
		ctl.ForceShed(3, now.Add(time.Minute)) // a drill in force, replaced by the call
		ctl.ForceShed(tc.level, tc.until)
		now = now.Add(period)
		ctl.Step(now)
		if got := rejectedShares(t, ctl, now, 200); got != tc.want {
			t.Errorf("ForceShed(%v, %v): rejected %v, want %v", tc.level, tc.until.Sub(now), got, tc.want)
		}
	}
}

// TestForceShedIsAFloor: with the signals already shedding more than the
// forced level, nothing changes; with a forced level above theirs, the
// plan sheds the forced level. Over a plant at 1.8C (SHEDDABLE and
// SHEDDABLE_PLUS shed by the signals, CRITICAL and CRITICAL_PLUS fit).
func TestForceShedIsAFloor(t *testing.T) {
	for _, tc := range []struct {
		forced     float64
		wantMinLvl float64 // the shed level at least
		critMax    float64 // CRITICAL's rejected share at most
		critMin    float64 // ... and at least
	}{
		{0, 1.5, 0.01, 0},      // the signals alone: about 1.8
		{1, 1.5, 0.01, 0},      // below the signals' level: no change
		{2.5, 2.5, 0.52, 0.48}, // above it: half of CRITICAL
	} {
		t.Run(fmt.Sprint("forced", tc.forced), func(t *testing.T) {
			const c0 = 1000.0
			p := newPlant(c0, 1)
			ctl := admit.New(admit.WithSignals(p), admit.WithSeed(1))
			var srcs []*source
			for _, cr := range levee.Criticalities() {
				srcs = append(srcs, &source{ctx: critCtx(cr, ""), rate: constant(0.45 * c0)})
			}
			s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
			s.hook = func(at time.Duration, now time.Time) {
				if tc.forced > 0 {
					ctl.ForceShed(tc.forced, now.Add(150*time.Millisecond)) // renewed every period
				}
			}
			s.run(4*time.Second, time.Second)
			for _, src := range srcs {
				src.admitted, src.rejected = 0, 0
			}
			var levels []float64
			prev := s.hook
			s.hook = func(at time.Duration, now time.Time) {
				prev(at, now)
				levels = append(levels, ctl.Snapshot().ShedLevel)
			}
			s.run(4*time.Second, time.Second)
			crit := float64(srcs[2].rejected) / float64(srcs[2].admitted+srcs[2].rejected)
			slices.Sort(levels)
			low := levels[len(levels)/20] // 5th percentile
			t.Logf("shed level p5 %.2f, CRITICAL rejected %.3f", low, crit)
			if low < tc.wantMinLvl-0.01 {
				t.Errorf("shed level p5 %.2f, want ≥ %.2f", low, tc.wantMinLvl)
			}
			if crit > tc.critMax || crit < tc.critMin {
				t.Errorf("CRITICAL rejected %.3f, want in [%.2f, %.2f]", crit, tc.critMin, tc.critMax)
			}
			if c := srcs[3].rejected; c != 0 {
				t.Errorf("CRITICAL_PLUS rejected %d times", c)
			}
		})
	}
}

// TestForceShedNeedsSteps: a floor is carried by the plan, and a plan
// nobody refreshes lapses after four periods: a controller whose Step
// stopped does not go on shedding for a drill.
func TestForceShedNeedsSteps(t *testing.T) {
	ctl := admit.New(admit.WithSignals(newFixedSignal(0.2, 0.8)), admit.WithPeriod(time.Minute))
	now := t0
	ctl.Step(now)
	ctl.ForceShed(4, now.Add(time.Hour))
	ctl.Step(now.Add(time.Minute))
	if got := rejectedShares(t, ctl, now.Add(time.Minute), 10); got != ([4]float64{1, 1, 1, 1}) {
		t.Fatalf("forced 4: rejected %v, want everything", got)
	}
	if got := rejectedShares(t, ctl, now.Add(6*time.Minute), 10); got != ([4]float64{}) {
		t.Errorf("five periods without a Step: rejected %v, want nothing (the plan lapsed)", got)
	}
}

// TestForceShedDryRun: in dry-run a forced level is counted, not applied.
func TestForceShedDryRun(t *testing.T) {
	ctl := admit.New(admit.WithSignals(newFixedSignal(0.2, 0.8)), admit.WithDryRun(true), admit.WithLogger(slog.New(slog.DiscardHandler)))
	ctl.Step(t0)
	ctl.ForceShed(2, t0.Add(time.Minute))
	ctl.Step(t0.Add(admit.DefaultPeriod))
	if got := rejectedShares(t, ctl, t0.Add(admit.DefaultPeriod), 100); got != ([4]float64{}) {
		t.Fatalf("dry-run, forced 2: rejected %v, want nothing", got)
	}
	ctl.Step(t0.Add(2 * admit.DefaultPeriod))
	s := ctl.Snapshot()
	if w := s.WouldReject[levee.Sheddable][levee.Overloaded] + s.WouldReject[levee.SheddablePlus][levee.Overloaded]; w != 200 || sumWould(s) != 200 {
		t.Errorf("would reject %v, want the 200 SHEDDABLE and SHEDDABLE_PLUS requests as overloaded", s.WouldReject)
	}
	if s.WouldShedRPS <= 0 {
		t.Errorf("WouldShedRPS %v under a forced level in dry-run, want > 0", s.WouldShedRPS)
	}
}

// TestDrillAndOverloadFloors: a drill (ForceShed) and an overload
// manager (OverloadShed, renewed every period with a short expiry) each
// keep their own floor; the higher is in force. The manager's periodic
// calls do not end the drill, a drill set or cleared meanwhile does not
// end the manager's floor, and each ends at its own expiry.
func TestDrillAndOverloadFloors(t *testing.T) {
	ctl := admit.New(admit.WithSignals(newFixedSignal(0.2, 0.8)))
	period := admit.DefaultPeriod
	now := t0
	ctl.Step(now)
	drillEnd := now.Add(2 * time.Second)
	ctl.ForceShed(1, drillEnd)

	managing := true
	var managerFloor float64
	step := func(d time.Duration) {
		for end := now.Add(d); now.Before(end); {
			now = now.Add(period)
			if managing {
				ctl.OverloadShed(managerFloor, now.Add(3*period)) // what overload.Manager.Step does
			}
			ctl.Step(now)
		}
	}
	check := func(when string, drill, manager float64, want [4]float64) {
		t.Helper()
		s := ctl.Snapshot()
		if s.ForcedShed != drill || s.OverloadShed != manager {
			t.Errorf("%s: snapshot drill %v, manager %v; want %v, %v", when, s.ForcedShed, s.OverloadShed, drill, manager)
		}
		if l, _, ok := ctl.ForcedShed(now); l != drill || ok != (drill > 0) {
			t.Errorf("%s: ForcedShed = %v, %v; want %v", when, l, ok, drill)
		}
		if l, _, ok := ctl.OverloadShedFloor(now); l != manager || ok != (manager > 0) {
			t.Errorf("%s: OverloadShedFloor = %v, %v; want %v", when, l, ok, manager)
		}
		got := rejectedShares(t, ctl, now, 100)
		for r := range got {
			if math.Abs(got[r]-want[r]) > 0.02 {
				t.Errorf("%s: rejected %v, want %v", when, got, want)
				break
			}
		}
	}

	managerFloor = 2
	step(500 * time.Millisecond)
	check("drill 1 under the manager's 2", 1, 2, [4]float64{1, 1, 0, 0})
	managerFloor = 0.5 // the manager's level fell; the drill is the higher
	step(500 * time.Millisecond)
	check("drill 1 over the manager's 0.5", 1, 0.5, [4]float64{1, 0, 0, 0})

	// The drill is cleared by hand (DELETE /drill): the manager's floor stays.
	managerFloor = 3
	step(2 * period)
	ctl.ForceShed(0, time.Time{})
	step(2 * period)
	check("drill cleared, manager at 3", 0, 3, [4]float64{1, 1, 1, 0})

	// A new drill while the manager renews: both; the manager stops (its
	// floor expires three periods later), the drill goes on.
	drillEnd = now.Add(time.Second)
	ctl.ForceShed(1.5, drillEnd)
	step(2 * period)
	check("drill 1.5 under the manager's 3", 1.5, 3, [4]float64{1, 1, 1, 0})
	managing = false
	step(3 * period)
	check("manager stopped", 1.5, 0, [4]float64{1, 0.5, 0, 0})
	for now.Before(drillEnd) {
		step(period)
	}
	check("drill expired", 0, 0, [4]float64{})
	// CRITICAL was shed by the manager's floor alone: its rejections
	// are the forced stage's, like a drill's.
	snap := ctl.Snapshot()
	if n, all := snap.Shed[levee.Critical][admit.StageForced], snap.Rejected[levee.Critical][levee.Overloaded]; n == 0 || n != all {
		t.Errorf("CRITICAL: %d rejections by the forced stage of %d; want all of them, and some", n, all)
	}
}

// TestShedStages: every overload rejection is counted once by the stage
// that decided it, and the stages add up to Rejected[cr][Overloaded]: the
// tenant stage cutting an abuser, the ladder, a forced level above the
// ladder's share, the run queue's expiry (internal test), and a
// rejection an adapter counted (CountRejected).
func TestShedStages(t *testing.T) {
	const c0 = 1000.0
	p := newPlant(c0, 1)
	ctl := admit.New(admit.WithSignals(p), admit.WithSeed(1))
	abuser := &source{ctx: critCtx(levee.CriticalPlus, "abuser"), rate: steps([]time.Duration{0, 2 * time.Second}, []float64{0.1 * c0, 3 * c0})}
	srcs := []*source{abuser}
	for i, cr := range levee.Criticalities() {
		srcs = append(srcs, &source{ctx: critCtx(cr, fmt.Sprint("t", i)), rate: constant(0.3 * c0)})
	}
	s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
	s.hook = func(at time.Duration, now time.Time) {
		if at >= 5*time.Second {
			ctl.ForceShed(3, now.Add(time.Second)) // CRITICAL too, beyond the ladder
		}
	}
	s.run(6*time.Second, time.Second)
	ctl.CountRejected(levee.Critical, levee.Overloaded)
	snap := ctl.Snapshot()
	for cr := range levee.NumCriticalities {
		var sum uint64
		for st := range admit.NumStages {
			sum += snap.Shed[cr][st]
		}
		if sum != snap.Rejected[cr][levee.Overloaded] {
			t.Errorf("%v: stages add up to %d, Rejected says %d (%v)", levee.Criticality(cr), sum, snap.Rejected[cr][levee.Overloaded], snap.Shed[cr])
		}
	}
	t.Logf("by stage: %v", snap.Shed)
	if n := snap.Shed[levee.CriticalPlus][admit.StageTenant]; n == 0 || snap.Shed[levee.CriticalPlus][admit.StageLadder] != 0 {
		t.Errorf("CRITICAL_PLUS: %d rejected by the tenant stage, %d by the ladder; want the abuser's cut, and no ladder", n, snap.Shed[levee.CriticalPlus][admit.StageLadder])
	}
	if snap.Shed[levee.Sheddable][admit.StageLadder] == 0 {
		t.Error("no SHEDDABLE request counted as shed by the ladder")
	}
	if snap.Shed[levee.Critical][admit.StageForced] == 0 || snap.Shed[levee.Critical][admit.StageExternal] != 1 {
		t.Errorf("CRITICAL: forced %d, external %d; want the forced level's and the one counted", snap.Shed[levee.Critical][admit.StageForced], snap.Shed[levee.Critical][admit.StageExternal])
	}
	for _, tc := range []struct {
		s    admit.Stage
		want string
	}{{admit.StageTenant, "tenant"}, {admit.StageLadder, "ladder"}, {admit.StageForced, "forced"}, {admit.StageRunQueue, "run_queue"}, {admit.StageExternal, "external"}, {0, ""}, {99, ""}} {
		if got := tc.s.String(); got != tc.want {
			t.Errorf("Stage(%d).String() = %q, want %q", tc.s, got, tc.want)
		}
	}
}
