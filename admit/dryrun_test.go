package admit_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// recordLog is a slog.Handler keeping every record, for tests.
type recordLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h *recordLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLog) WithGroup(string) slog.Handler      { return h }

// messages returns the records whose message is msg.
func (h *recordLog) messages(msg string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.recs {
		if r.Message == msg {
			out = append(out, r)
		}
	}
	return out
}

func sumWould(s admit.Snapshot) (n uint64) {
	for _, by := range s.WouldReject {
		for _, v := range by {
			n += v
		}
	}
	return n
}

func sumRejected(s admit.Snapshot) (n uint64) {
	for _, by := range s.Rejected {
		for _, v := range by {
			n += v
		}
	}
	return n
}

// TestDryRunEstimatesShed is issue 18's dry-run on virtual time: a server
// of capacity C learns C at 0.7C for 4 s, then 3C arrive for 8 s, the four
// criticalities in equal parts, with the controller in dry-run throughout.
// Nothing is rejected; what it would reject over the 3C phase is offered −
// C within ±15% (the loopback acceptance; here within ±10%), lowest
// criticality first and never CRITICAL_PLUS; its capacity estimate stays
// at what it learned instead of following the saturated signal; at most
// one "would reject" line a second is logged, and their counts add up.
func TestDryRunEstimatesShed(t *testing.T) {
	for _, seed := range testSeeds() {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			const c0 = 1000.0
			p := newPlant(c0, seed)
			logs := &recordLog{}
			ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed), admit.WithDryRun(true), admit.WithLogger(slog.New(logs)))
			var srcs []*source
			for _, cr := range levee.Criticalities() {
				srcs = append(srcs, &source{ctx: critCtx(cr, ""), rate: steps([]time.Duration{0, 4 * time.Second}, []float64{0.7 * c0 / 4, 3 * c0 / 4})})
			}
			var caps []float64
			s := &sim{ctl: ctl, p: p, srcs: srcs, t0: t0}
			s.hook = func(at time.Duration, now time.Time) {
				if at >= 5*time.Second {
					caps = append(caps, ctl.Snapshot().CapacityRPS)
				}
			}
			s.run(4*time.Second, time.Second)
			warm := ctl.Snapshot()
			linesWarm := len(logs.messages("admit: dry-run: would reject"))
			before := make([]int, len(srcs))
			for i, src := range srcs {
				before[i] = src.n
			}
			s.run(8*time.Second, time.Second)
			over := ctl.Snapshot()

			if !over.DryRun {
				t.Fatal("Snapshot.DryRun false under WithDryRun(true)")
			}
			offered := 0
			for i, src := range srcs {
				offered += src.n - before[i]
				if src.rejected != 0 {
					t.Errorf("%v: %d rejected in dry-run, want 0", levee.FromRank(i), src.rejected)
				}
			}
			if n := sumRejected(over); n != 0 {
				t.Errorf("Snapshot.Rejected sums to %d in dry-run, want 0", n)
			}
			if w := sumWould(warm); float64(w) > 0.02*0.7*c0*4 {
				t.Errorf("%d would-be rejections at 0.7C, want ≤ 2%% of the offered", w)
			}
			would := float64(sumWould(over) - sumWould(warm))
			excess := float64(offered) - c0*8
			t.Logf("offered %d over 8 s, would reject %.0f, offered − C %.0f: ratio %.3f; would shed %.0f/s; per criticality %v",
				offered, would, excess, would/excess, over.WouldShedRPS, over.WouldReject)
			if r := would / excess; math.Abs(r-1) > 0.1 {
				t.Errorf("would reject ÷ (offered − C) = %.3f, want within ±10%% of 1", r)
			}
			if r := over.WouldShedRPS / (3*c0 - c0); math.Abs(r-1) > 0.15 {
				t.Errorf("WouldShedRPS %.0f, want 2C = %.0f ±15%%", over.WouldShedRPS, 2*c0)
			}
			if n := sumOver(over.WouldReject[levee.CriticalPlus]); n != 0 {
				t.Errorf("CRITICAL_PLUS counted %d times as would-reject, want 0", n)
			}
			share := func(cr levee.Criticality) float64 {
				return float64(sumOver(over.WouldReject[cr])-sumOver(warm.WouldReject[cr])) / (float64(offered) / 4)
			}
			if s, sp := share(levee.Sheddable), share(levee.SheddablePlus); s < 0.95 || sp < 0.95 {
				t.Errorf("would-reject share SHEDDABLE %.3f, SHEDDABLE_PLUS %.3f, want ≥ 0.95 each (lowest first)", s, sp)
			}
			for _, c := range caps {
				if math.Abs(c/c0-1) > 0.1 {
					t.Fatalf("capacity estimate %.0f during the dry-run overload, want the %.0f learned before it ±10%% (frozen)", c, c0)
				}
			}
			lines := logs.messages("admit: dry-run: would reject")
			if linesWarm > 1 {
				t.Errorf("%d would-reject lines at 0.7C", linesWarm)
			}
			if n := len(lines) - linesWarm; n < 7 || n > 9 {
				t.Errorf("%d would-reject lines over 8 s of overload, want one a second (7–9)", n)
			}
			var logged uint64
			for _, r := range lines {
				r.Attrs(func(a slog.Attr) bool {
					if a.Value.Kind() == slog.KindGroup {
						for _, g := range a.Value.Group() {
							logged += g.Value.Uint64()
						}
					}
					return true
				})
			}
			// The lines report what grew since the previous one: they add
			// up to the counters, but for the last second's, not logged yet.
			if total := float64(sumWould(over)); float64(logged) > total || float64(logged) < total-1.1*2*c0 {
				t.Errorf("the lines add up to %d would-be rejections, the counters to %.0f: want all but the last second's", logged, total)
			}
		})
	}
}

func sumOver(by [levee.NumReasons]uint64) (n uint64) {
	for _, v := range by {
		n += v
	}
	return n
}

// TestDryRunSwitch: SetDryRun turns rejections into counts at the next
// Admit and back. A quota exceeded is admitted and counted in dry-run; a
// request whose deadline has passed is refused all the same (its answer
// reaches nobody), counted as a would-be rejection, and takes no quota
// token; live again, both are rejected and counted as such.
func TestDryRunSwitch(t *testing.T) {
	sig := newFixedSignal(0.4, 0.8)
	ctl := admit.New(admit.WithSignals(sig), admit.WithQuota("q", admit.Quota{Rate: 1, Burst: 1}), admit.WithLogger(slog.New(slog.DiscardHandler)))
	now := t0
	ctl.Step(now)
	expired, cancel := context.WithDeadline(levee.WithCall(context.Background(), levee.Call{Tenant: "q"}), now.Add(-time.Second))
	defer cancel()
	quota := levee.WithCall(context.Background(), levee.Call{Tenant: "q"})

	ctl.SetDryRun(true)
	if !ctl.DryRun() {
		t.Fatal("DryRun() false after SetDryRun(true)")
	}
	if _, err := ctl.AdmitAt(expired, now); !errors.Is(err, levee.ErrDeadline) {
		t.Fatalf("dry-run, deadline passed: %v, want a Deadline rejection", err)
	}
	for _, name := range []string{"quota token", "over quota"} {
		tk, err := ctl.AdmitAt(quota, now)
		if err != nil {
			t.Fatalf("dry-run, %s: %v, want admitted", name, err)
		}
		tk.DoneAt(now, nil)
	}
	s := ctl.Snapshot()
	if got := s.WouldReject[levee.Critical]; got[levee.Deadline] != 1 || got[levee.Quota] != 1 {
		t.Errorf("would reject %v, want 1 deadline (the expired one) and 1 quota (the second: the expired one took no token)", got)
	}
	if n := sumRejected(s); n != 0 || s.Admitted[levee.Critical] != 3 {
		t.Errorf("rejected %d, admitted %d, want 0 and 3 (Admitted counts arrivals less Rejected)", n, s.Admitted[levee.Critical])
	}

	ctl.SetDryRun(false)
	if _, err := ctl.AdmitAt(expired, now); err == nil {
		t.Error("live: an expired deadline admitted")
	}
	if _, err := ctl.AdmitAt(quota, now); err == nil {
		t.Error("live: a request over quota admitted")
	}
	if s := ctl.Snapshot(); sumRejected(s) != 2 || sumWould(s) != 2 {
		t.Errorf("live: rejected %d, would %d, want 2 and 2", sumRejected(s), sumWould(s))
	}
}

// TestDryRunEndsIntoShedding: dry-run switched off in an overload starts
// shedding from the capacity it estimated, at once: the next second
// admits about C, not everything, and not next to nothing.
func TestDryRunEndsIntoShedding(t *testing.T) {
	const c0 = 1000.0
	p := newPlant(c0, 1)
	ctl := admit.New(admit.WithSignals(p), admit.WithSeed(1), admit.WithDryRun(true), admit.WithLogger(slog.New(slog.DiscardHandler)))
	src := &source{ctx: critCtx(levee.Critical, ""), rate: steps([]time.Duration{0, 4 * time.Second}, []float64{0.7 * c0, 3 * c0})}
	s := &sim{ctl: ctl, p: p, srcs: []*source{src}, t0: t0}
	s.run(6*time.Second, time.Second)
	ctl.SetDryRun(false)
	w := s.run(time.Second, time.Second)[0]
	t.Logf("first second after dry-run: admitted %.0f/s of %.0f/s", w.admitted, w.offered)
	if w.admitted < 0.5*c0 || w.admitted > 1.2*c0 {
		t.Errorf("admitted %.0f/s in the first second live, want about C = %.0f/s", w.admitted, c0)
	}
}
