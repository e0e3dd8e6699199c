package config

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/throttle"
)

const baseFile = `version: 1
reload:
  poll: 1s
signals:
  cpu:
    target: 0.9
admit:
  period: 50ms
`

// recorder is a Target that records what it is given and can refuse.
type recorder struct {
	mu      sync.Mutex
	applied []*Config
	refuse  error
}

func (r *recorder) Check(*Config) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refuse
}

func (r *recorder) Apply(c *Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, c)
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.applied)
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newLog() (*logBuffer, *slog.Logger) {
	var b logBuffer
	return &b, slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestReloadPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "levee.yaml")
		writeFile(t, path, baseFile)
		logs, logger := newLog()
		rl, err := Open(path, WithEnv(nil), WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		if err := rl.Subscribe(rec); err != nil {
			t.Fatal(err)
		}
		if rec.count() != 1 {
			t.Fatalf("Subscribe applied %d configs, want 1 (the one in force)", rec.count())
		}
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go rl.Run(ctx)

		// A valid change is applied at the next poll.
		writeFile(t, path, strings.Replace(baseFile, "target: 0.9", "target: 0.8", 1))
		time.Sleep(1100 * time.Millisecond)
		synctest.Wait()
		if got := rl.Current().Signals.CPU.Target; got != 0.8 {
			t.Fatalf("target after the file changed = %v, want 0.8", got)
		}
		if st := rl.State(); st.Generation != 2 || rec.count() != 2 {
			t.Errorf("generation %d, applied %d times; want 2 and 2", st.Generation, rec.count())
		}
		if l := logs.String(); !strings.Contains(l, `msg="config: changed" field=signals.cpu.target old=0.9 new=0.8 generation=2`) {
			t.Errorf("the change was not logged with its diff:\n%s", l)
		}

		// An invalid file is rejected whole, reported once, and the
		// configuration in force stays.
		writeFile(t, path, strings.Replace(baseFile, "target: 0.9", "target: 3\n    perod: 1s", 1))
		for range 3 {
			time.Sleep(time.Second)
			synctest.Wait()
		}
		if got := rl.Current().Signals.CPU.Target; got != 0.8 {
			t.Errorf("target after an invalid file = %v, want 0.8 (kept)", got)
		}
		res, _ := rl.Last()
		if res.Err == nil {
			t.Fatal("the invalid file was not rejected")
		}
		for _, want := range []string{
			path + ":6:13: signals.cpu.target: must be in (0, 2], got 3",
			path + `:7:5: signals.cpu.perod: unknown field "perod" (did you mean "period"?)`,
		} {
			if !strings.Contains(res.Err.Error(), want) {
				t.Errorf("rejection %q does not say %q", res.Err, want)
			}
		}
		if n := strings.Count(logs.String(), "config: rejected"); n != 1 {
			t.Errorf("the rejection was logged %d times over 3 polls, want once", n)
		}
		if st := rl.Stats(); st.Rejected != 1 || st.Applied != 1 || st.LastOK {
			t.Errorf("stats = %+v, want 1 applied, 1 rejected, last not OK", st)
		}

		// A change to a field that needs a restart is rejected whole, with
		// the valid change beside it.
		writeFile(t, path, strings.Replace(strings.Replace(baseFile, "period: 50ms", "period: 100ms", 1), "target: 0.9", "target: 0.7", 1))
		time.Sleep(time.Second)
		synctest.Wait()
		res, _ = rl.Last()
		if want := path + ":8:11: admit.period: cannot change while the service runs (in force: 50ms, new: 100ms): restart to apply it"; res.Err == nil || !strings.Contains(res.Err.Error(), want) {
			t.Errorf("rejection = %v, want it to say %q", res.Err, want)
		}
		if got := rl.Current().Signals.CPU.Target; got != 0.8 {
			t.Errorf("target after a rejected reload = %v, want 0.8 (kept)", got)
		}

		// Rewriting the same content is not a change.
		writeFile(t, path, strings.Replace(baseFile, "target: 0.9", "target: 0.8", 1))
		time.Sleep(time.Second)
		synctest.Wait()
		before := rl.Stats()
		writeFile(t, path, strings.Replace(baseFile, "target: 0.9", "target: 0.8", 1))
		time.Sleep(time.Second)
		synctest.Wait()
		if after := rl.Stats(); after.Applied != before.Applied || after.Rejected != before.Rejected {
			t.Errorf("rewriting the same content: stats %+v → %+v", before, after)
		}
	})
}

func TestReloadTargetRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "levee.yaml")
	writeFile(t, path, baseFile)
	rl, err := Open(path, WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ok, refusing := &recorder{}, &recorder{}
	if err := rl.Subscribe(ok, refusing); err != nil {
		t.Fatal(err)
	}
	refusing.refuse = errors.New("fleet: redis address unreachable")
	writeFile(t, path, strings.Replace(baseFile, "target: 0.9", "target: 0.8", 1))
	res := rl.Reload()
	if res.Err == nil || !strings.Contains(res.Err.Error(), "fleet: redis address unreachable") {
		t.Errorf("Reload = %+v, want the target's refusal", res)
	}
	if ok.count() != 1 || refusing.count() != 1 {
		t.Errorf("a refused config was applied: %d and %d applies, want 1 and 1 (subscription only)", ok.count(), refusing.count())
	}
	if got := rl.Current().Signals.CPU.Target; got != 0.9 {
		t.Errorf("target = %v, want 0.9 (kept)", got)
	}
	refusing.refuse = nil
	if res := rl.Reload(); !res.Applied || len(res.Changes) != 1 {
		t.Errorf("Reload once accepted = %+v, want applied with one change", res)
	}
	if err := rl.Subscribe(&recorder{refuse: errors.New("no")}); err == nil {
		t.Error("Subscribe of a target refusing the config in force succeeded")
	}
}

func TestOverrides(t *testing.T) {
	path := filepath.Join(t.TempDir(), "levee.yaml")
	writeFile(t, path, baseFile)
	rl, err := Open(path, WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if res := rl.SetOverride("admit.dry_run", "true"); !res.Applied || !rl.Current().Admit.DryRun {
		t.Fatalf("SetOverride(dry_run) = %+v", res)
	}
	// The override survives a reload of a changed file.
	writeFile(t, path, strings.Replace(baseFile, "target: 0.9", "target: 0.8", 1))
	if res := rl.Reload(); !res.Applied || !rl.Current().Admit.DryRun || rl.Current().Signals.CPU.Target != 0.8 {
		t.Errorf("after a reload: %+v, dry-run %v", res, rl.Current().Admit.DryRun)
	}
	// A bad override is refused and not kept.
	if res := rl.SetOverride("admit.dry_run", "maybe"); res.Err == nil || rl.Overrides()["admit.dry_run"] != "true" {
		t.Errorf("a bad override: %+v, overrides %v", res, rl.Overrides())
	}
	if res := rl.SetOverride("admit.period", "1s"); res.Err == nil || rl.Current().Admit.Period != 50*time.Millisecond {
		t.Errorf("an override of a restart-only field: %+v", res)
	}
	if res := rl.ClearOverride("admit.dry_run"); !res.Applied || rl.Current().Admit.DryRun || len(rl.Overrides()) != 0 {
		t.Errorf("ClearOverride = %+v, dry-run %v, overrides %v", res, rl.Current().Admit.DryRun, rl.Overrides())
	}
}

func TestReloaderWithoutFile(t *testing.T) {
	base := Default()
	base.Signals.CPU.Target = 0.7
	rl, err := NewReloader(base, WithEnv([]string{"LEVEE_ADMIT_DRY_RUN=true"}), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if c := rl.Current(); c.Signals.CPU.Target != 0.7 || !c.Admit.DryRun {
		t.Errorf("config = target %v dry-run %v, want 0.7 and true (from the environment)", c.Signals.CPU.Target, c.Admit.DryRun)
	}
	if res := rl.Reload(); !errors.Is(res.Err, ErrNoFile) {
		t.Errorf("Reload without a file = %v, want ErrNoFile", res.Err)
	}
	if res := rl.SetOverride("admit.dry_run", "false"); !res.Applied || rl.Current().Admit.DryRun {
		t.Errorf("override without a file = %+v", res)
	}
	base.Signals.CPU.Target = 0.1
	if rl.Current().Signals.CPU.Target != 0.7 {
		t.Error("changing the base after NewReloader changed the config in force")
	}
	bad := Default()
	bad.Version = 0
	if _, err := NewReloader(bad); err == nil {
		t.Error("NewReloader of an invalid config succeeded")
	}
}

func TestReloadSIGHUP(t *testing.T) {
	// Keep SIGHUP from ending the test binary whatever happens.
	guard := make(chan os.Signal, 1)
	signal.Notify(guard, syscall.SIGHUP)
	defer signal.Stop(guard)

	path := filepath.Join(t.TempDir(), "levee.yaml")
	file := strings.Replace(baseFile, "poll: 1s", "poll: 0s\n  sighup: true", 1)
	writeFile(t, path, file)
	rl, err := Open(path, WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go rl.Run(ctx)
	writeFile(t, path, strings.Replace(file, "target: 0.9", "target: 0.8", 1))
	// Run registers for SIGHUP as it starts: send until it is seen, for at
	// most 10 s (the bound stops a broken Run from hanging the test).
	for i := 0; rl.Current().Signals.CPU.Target != 0.8; i++ {
		if i == 1000 {
			t.Fatal("SIGHUP did not reload the file")
		}
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res, _ := rl.Last(); res.Reason != "sighup" {
		t.Errorf("reload reason = %q, want sighup", res.Reason)
	}
}

// fakeAdmission records what ApplyAdmission sets.
type fakeAdmission struct {
	dryRun   bool
	quotas   map[string]admit.Quota
	setCalls int
}

func (f *fakeAdmission) SetDryRun(on bool) { f.dryRun = on }
func (f *fakeAdmission) SetQuotas(q map[string]admit.Quota) {
	f.quotas = q
	f.setCalls++
}

func TestApplyTargets(t *testing.T) {
	cfg := Default()
	cfg.Signals.Goroutines.Limit = 10_000
	set, err := cfg.Signals.Set()
	if err != nil {
		t.Fatal(err)
	}
	deg := degrade.New()
	g := throttle.NewGroup()
	adm := &fakeAdmission{}
	rl, err := NewReloader(cfg, WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Subscribe(ApplySignals(set), ApplyDegrade(deg), ApplyThrottle(g), ApplyAdmission(adm)); err != nil {
		t.Fatal(err)
	}
	for path, v := range map[string]string{
		"signals.cpu.target":           "0.7",
		"signals.sched_latency.target": "20ms",
		"signals.queue_delay.target":   "8ms",
		"signals.memory.target":        "0.7",
		"signals.gc_cpu.target":        "0.4",
		"signals.goroutines.target":    "0.6",
		"signals.open_files.target":    "0.5",
		"degrade.target":               "0.6",
		"degrade.max":                  "5",
		"client.throttle.k":            "1.5",
		"admit.dry_run":                "true",
		"admit.quotas":                 "{acme: {rate: 10}}",
	} {
		if res := rl.SetOverride(path, v); !res.Applied {
			t.Fatalf("override %s=%s: %+v", path, v, res)
		}
	}
	for _, x := range []struct {
		name      string
		got, want float64
	}{
		{"cpu target", set.CPU.Target(), 0.7},
		{"sched target", set.Sched.Target(), 0.02},
		{"queue target", set.Queue.Target(), 0.008},
		{"memory target", set.Memory.Target(), 0.7},
		{"gc_cpu target", set.GC.Target(), 0.4},
		{"goroutines target", set.Goroutines.Target(), 0.6},
		{"open_files target", set.OpenFiles.Target(), 0.5},
		{"degrade target", deg.Target(), 0.6},
		{"degrade max", float64(deg.Max()), 5},
		{"throttle K", g.Get("backend").K(), 1.5},
		{"quota rate", adm.quotas["acme"].Rate, 10},
	} {
		if x.got != x.want {
			t.Errorf("%s = %v, want %v", x.name, x.got, x.want)
		}
	}
	if !adm.dryRun {
		t.Error("dry-run not applied")
	}
	calls := adm.setCalls
	rl.SetOverride("signals.cpu.target", "0.75")
	if adm.setCalls != calls {
		t.Errorf("SetQuotas called again (%d → %d) when the quotas did not change", calls, adm.setCalls)
	}
	// A learned queue target comes back with 0.
	if res := rl.SetOverride("signals.queue_delay.target", "0s"); !res.Applied || set.Queue.Target() != 0.1 {
		t.Errorf("queue target 0s: %+v, target %v, want the unlearned 0.1", res, set.Queue.Target())
	}
	// What cannot change at run time is refused, and nothing changes.
	for path, v := range map[string]string{
		"signals.concurrency.latency_ratio": "3",
		"signals.goroutines.limit":          "500",
		"signals.memory.enabled":            "false",
		"signals.open_files.period":         "2s",
		"signals.queue_delay.target_floor":  "1ms",
	} {
		before := rl.Current()
		if res := rl.SetOverride(path, v); res.Applied || res.Err == nil || !strings.Contains(res.Err.Error(), "restart to apply it") {
			t.Errorf("override %s=%s of a restart-only field: %+v", path, v, res)
		}
		if rl.Current() != before {
			t.Errorf("override %s=%s changed the config in force", path, v)
		}
	}
}

// TestApplyOverload: the overload section's tunables reach a running
// Manager at a reload; enabled and period need a restart; a Manager
// built from Default() is as one built with no options.
func TestApplyOverload(t *testing.T) {
	var mem overload.Reading
	m := overload.New(append(Default().Overload.Options(), overload.WithResources(
		overload.MemoryResource(func() overload.Reading { return mem })))...)
	rl, err := NewReloader(Default(), WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Subscribe(ApplyOverload(m)); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	step := func(v float64) overload.State {
		mem = overload.Reading{Value: v}
		now = now.Add(100 * time.Millisecond)
		m.Step(now)
		return m.State()
	}
	if s := step(0.9); s.Level != overload.Normal {
		t.Fatalf("0.9 under the default thresholds: %v, want normal", s.Level)
	}
	for path, v := range map[string]string{
		"overload.resources.memory.elevated":       "0.85",
		"overload.actions.keep_alive_off.level":    "elevated",
		"overload.actions.keep_alive_off.cooldown": "0s",
		"overload.shed_floors.elevated":            "1.5",
		"overload.body_limit":                      "1000",
		"overload.idle_timeout":                    "300ms",
		"overload.actions.critical_only.level":     "off",
	} {
		if res := rl.SetOverride(path, v); !res.Applied {
			t.Fatalf("override %s=%s: %+v", path, v, res)
		}
	}
	s := step(0.9)
	if s.Level != overload.Elevated || !s.Active[overload.KeepAlive] || s.ShedFloor != 1.5 || s.BodyLimit != 1000 || s.IdleTimeout != 300*time.Millisecond {
		t.Errorf("after the reload, 0.9: level %v, keep-alive off %v, shed floor %v, body limit %v, idle %v; want elevated, true, 1.5, 1000, 300ms",
			s.Level, s.Active[overload.KeepAlive], s.ShedFloor, s.BodyLimit, s.IdleTimeout)
	}
	if s := step(0.99); s.Active[overload.CriticalOnly] {
		t.Error("critical_only set off by the reload, but active at 0.99")
	}
	if s := step(0.5); s.Active[overload.KeepAlive] {
		t.Error("keep_alive_off with cooldown 0s still active once the level fell")
	}
	for path, v := range map[string]string{"overload.enabled": "false", "overload.period": "1s"} {
		before := rl.Current()
		if res := rl.SetOverride(path, v); res.Applied || res.Err == nil || !strings.Contains(res.Err.Error(), "restart to apply it") {
			t.Errorf("override %s=%s of a restart-only field: %+v", path, v, res)
		}
		if rl.Current() != before {
			t.Errorf("override %s=%s changed the config in force", path, v)
		}
	}
}

func TestOverridesRedacted(t *testing.T) {
	rl, err := NewReloader(Default(), WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if res := rl.SetOverride("admin.token", "0123456789abcdef-secret"); !res.Applied {
		t.Fatal(res.Err)
	}
	if got := rl.Overrides()["admin.token"]; got != Redacted {
		t.Errorf("override of admin.token shows %q, want %q", got, Redacted)
	}
	if got := rl.Current().Admin.Token; got != "0123456789abcdef-secret" {
		t.Errorf("token in force = %q", got)
	}
}

// TestApplyAdmissionController applies a configuration to levee's own
// admission controller: dry-run and quotas follow every reload, and a
// tenant whose quota did not change keeps its bucket.
func TestApplyAdmissionController(t *testing.T) {
	cfg := Default()
	cfg.Admit.Quotas = map[string]Quota{"acme": {Rate: 0.01, Burst: 1}} // a token every 100 s: none comes back during the test
	ctl := admit.New(admit.WithLogger(slog.New(slog.DiscardHandler)))
	rl, err := NewReloader(cfg, WithEnv(nil), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Subscribe(ApplyAdmission(ctl)); err != nil {
		t.Fatal(err)
	}
	acme := levee.WithCall(context.Background(), levee.Call{Tenant: "acme"})
	admitted := func() (n int) {
		for range 3 {
			if tk, err := ctl.Admit(acme); err == nil {
				n++
				tk.Done(nil)
			}
		}
		return n
	}
	if q := ctl.Quotas(); q["acme"].Rate != 0.01 || ctl.DryRun() {
		t.Fatalf("after Subscribe: quotas %v, dry-run %v", q, ctl.DryRun())
	}
	if n := admitted(); n != 1 {
		t.Fatalf("acme admitted %d of 3 at once with burst 1, want 1", n)
	}
	if res := rl.SetOverride("admit.dry_run", "true"); !res.Applied || !ctl.DryRun() {
		t.Fatalf("dry_run override: %+v, dry-run %v", res, ctl.DryRun())
	}
	if n := admitted(); n != 3 {
		t.Errorf("dry-run: acme admitted %d of 3, want 3", n)
	}
	rl.SetOverride("admit.dry_run", "false")
	if n := admitted(); n != 0 {
		t.Errorf("live again, same quota: acme admitted %d of 3, want 0 (its bucket is still empty)", n)
	}
	if res := rl.SetOverride("admit.quotas", "{acme: {rate: 0.01, burst: 2}, beta: {rate: 5}}"); !res.Applied {
		t.Fatalf("quotas override: %+v", res)
	}
	if q := ctl.Quotas(); len(q) != 2 || q["acme"].Burst != 2 || q["beta"].Rate != 5 {
		t.Errorf("quotas after the override: %v", q)
	}
	if n := admitted(); n != 2 {
		t.Errorf("acme's quota changed: admitted %d of 3, want 2 (a new, full bucket)", n)
	}
	if s := ctl.Snapshot(); s.Rejected[levee.Critical][levee.Quota] != 6 || s.WouldReject[levee.Critical][levee.Quota] != 3 {
		t.Errorf("quota rejections %d, would-be %d; want 6 and 3", s.Rejected[levee.Critical][levee.Quota], s.WouldReject[levee.Critical][levee.Quota])
	}
}
