package leveehttp

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/overload"
)

// TestProtectOverloadActions drives Protect's own overload manager on
// loopback with a scripted memory resource (the process's signals of a
// limit are off, so that only the script moves the level) through
// Elevated, High and Critical and back, and checks each action as a
// client sees it: large and undeclared bodies refused, the shed floor
// through admission, keep-alive off and short idle timeouts, at the last
// level only CRITICAL_PLUS and probes served, levee's own pages answered
// throughout; then everything ends once the reading falls. A drill set
// meanwhile keeps its own floor.
func TestProtectOverloadActions(t *testing.T) {
	cfg := config.Default()
	cfg.HTTP.TrustedNetworks = []config.Network{mustNetwork("127.0.0.0/8")}
	cfg.Signals.Memory.Enabled, cfg.Signals.GCCPU.Enabled, cfg.Signals.OpenFiles.Enabled = false, false, false
	cfg.Overload.Resources.Memory.Elevated = 0.9 // the section's thresholds reach the scripted resource
	for _, a := range []*config.OverloadAction{&cfg.Overload.Actions.Shed, &cfg.Overload.Actions.LargeBodies,
		&cfg.Overload.Actions.KeepAliveOff, &cfg.Overload.Actions.ShortTimeouts, &cfg.Overload.Actions.CriticalOnly} {
		a.Cooldown = 200 * time.Millisecond
	}
	cfg.Overload.IdleTimeout = 200 * time.Millisecond

	var reading atomic.Uint64 // float64 bits
	set := func(v float64) { reading.Store(math.Float64bits(v)) }
	set(0.5)
	scripted := overload.MemoryResource(func() overload.Reading {
		return overload.Reading{Value: math.Float64frombits(reading.Load())}
	})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		fmt.Fprint(w, "ok")
	})
	p, base := protectLoopback(t, context.Background(), app, WithConfig(cfg, config.WithEnv(nil)),
		WithOverloadOptions(overload.WithResources(scripted)))
	if p.Overload() == nil {
		t.Fatal("Protect built no overload manager")
	}
	m := p.Overload().Manager()
	ctl := p.Controller()
	if got := m.Status().Resources; len(got) != 1 || got[0].Enter[0] != 0.9 {
		t.Fatalf("manager resources %+v, want the scripted memory with the section's elevated 0.9", got)
	}

	type result struct {
		code  int
		close bool // the response ends its connection
	}
	do := func(method, path, crit string, body io.Reader, length int64) result {
		t.Helper()
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length
		if crit != "" {
			req.Header.Set(HeaderCriticality, crit)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return result{resp.StatusCode, resp.Close}
	}
	call := func(crit string) int { return do("GET", "/app", crit, nil, 0).code }
	post := func(size int64, declared bool) int {
		length := size
		if !declared {
			length = -1 // chunked
		}
		return do("POST", "/app", "CRITICAL", strings.NewReader(strings.Repeat("x", int(size))), length).code
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waited 10 s for %s", what)
			}
		}
	}
	expect := func(when string, checks ...struct {
		what      string
		got, want int
	}) {
		t.Helper()
		for _, c := range checks {
			if c.got != c.want {
				t.Errorf("%s: %s = %d, want %d", when, c.what, c.got, c.want)
			}
		}
	}
	type check = struct {
		what      string
		got, want int
	}
	const big = 2 << 20

	expect("normal",
		check{"SHEDDABLE", call("SHEDDABLE"), 200},
		check{"CRITICAL", call("CRITICAL"), 200},
		check{"a 2 MiB body", post(big, true), 200},
		check{"an undeclared body", post(10, false), 200})

	// A drill on the same controller: its floor stays when the manager's
	// comes and goes.
	ctl.ForceShed(1, time.Now().Add(time.Minute))

	set(0.91) // Elevated (the section's 0.9): SHEDDABLE shed, large bodies refused
	waitFor("elevated and its shed floor", func() bool {
		return m.Level() == overload.Elevated && ctl.Snapshot().OverloadShed == 1
	})
	expect("elevated",
		check{"SHEDDABLE", call("SHEDDABLE"), 503},
		check{"SHEDDABLE_PLUS", call("SHEDDABLE_PLUS"), 200},
		check{"a 2 MiB body", post(big, true), 503},
		check{"an undeclared body", post(10, false), 503},
		check{"a small body", post(10, true), 200})
	if s := ctl.Snapshot(); s.ForcedShed != 1 {
		t.Errorf("elevated: the drill's floor %v, want 1 beside the manager's", s.ForcedShed)
	}

	set(0.96) // High: SHEDDABLE_PLUS shed too, keep-alive off, short timeouts
	waitFor("high and its actions", func() bool {
		st := m.State()
		return st.Level == overload.High && st.Active[overload.KeepAlive] && st.Active[overload.Timeouts] && ctl.Snapshot().OverloadShed == 2
	})
	if r := do("GET", "/app", "CRITICAL", nil, 0); r.code != 200 || !r.close {
		t.Errorf("high: CRITICAL = %d, closes its connection %v; want 200 and Connection: close", r.code, r.close)
	}
	expect("high", check{"SHEDDABLE_PLUS", call("SHEDDABLE_PLUS"), 503})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !waitClosed(conn, 5*time.Second) {
		t.Error("high: a connection that sends nothing was not closed by the short idle timeout (200ms)")
	}

	set(0.99) // Critical: only CRITICAL_PLUS and probes
	waitFor("critical", func() bool { return m.Level() == overload.Critical })
	expect("critical",
		check{"CRITICAL", call("CRITICAL"), 503},
		check{"CRITICAL_PLUS", call("CRITICAL_PLUS"), 200},
		check{"/healthz (a probe)", do("GET", "/healthz", "SHEDDABLE", nil, 0).code, 200},
		check{"/levee/status.json", do("GET", "/levee/status.json", "", nil, 0).code, 200},
		check{"/metrics", do("GET", "/metrics", "", nil, 0).code, 200})
	_, status, _ := get(t, base+"/levee/status.json")
	if !strings.Contains(status, `"overload":{`) || !strings.Contains(status, `"level":"critical"`) {
		t.Errorf("critical: status JSON lacks the manager's state:\n%.400s", status)
	}
	_, metrics, _ := get(t, base+"/metrics")
	for _, line := range []string{"levee_overload_level 3", `levee_overload_action_active{kind="critical_only"} 1`} {
		if !strings.Contains(metrics, line) {
			t.Errorf("critical: metrics lack %q", line)
		}
	}
	if n := ctl.Snapshot().Rejected[levee.Critical][levee.Overloaded]; n == 0 {
		t.Error("critical: the gate's refusals are not counted by the controller")
	}

	set(0.5) // back to normal: every action ends after its cooldown
	waitFor("normal, every action ended, the manager's floor expired", func() bool {
		return m.Level() == overload.Normal && m.State().Active == [overload.NumActions]bool{} && ctl.Snapshot().OverloadShed == 0
	})
	if r := do("GET", "/app", "CRITICAL", nil, 0); r.code != 200 || r.close {
		t.Errorf("normal again: CRITICAL = %d, closes its connection %v; want 200 and keep-alive", r.code, r.close)
	}
	expect("normal again",
		check{"SHEDDABLE_PLUS", call("SHEDDABLE_PLUS"), 200},
		check{"SHEDDABLE (the drill's floor)", call("SHEDDABLE"), 503},
		check{"a 2 MiB body", post(big, true), 200})
	if s := ctl.Snapshot(); s.ForcedShed != 1 {
		t.Errorf("normal again: the drill's floor %v, want 1 (it outlives the manager's)", s.ForcedShed)
	}
	ctl.ForceShed(0, time.Time{})
	waitFor("the drill's end", func() bool { return ctl.Snapshot().ForcedShed == 0 })
	expect("after the drill", check{"SHEDDABLE", call("SHEDDABLE"), 200})
}

// TestProtectOverloadDivision: with the manager (the default) admission
// reads the CPU, scheduler-latency, queue-delay and concurrency signals
// and the manager the limits' signals; with overload.enabled false there
// is no manager and admission reads every signal.
func TestProtectOverloadDivision(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		t.Run(fmt.Sprint("enabled=", enabled), func(t *testing.T) {
			cfg := config.Default()
			cfg.Overload.Enabled = enabled
			cfg.Signals.Goroutines.Limit = 100_000
			p, base := protectLoopback(t, context.Background(), nil, WithConfig(cfg, config.WithEnv(nil)))
			var admitted []string
			for _, s := range p.Controller().Snapshot().Signals {
				admitted = append(admitted, s.Name)
			}
			limits := []string{"memory", "gc_cpu", "goroutines", "open_files"}
			want := []string{"cpu", "sched_latency", "queue_delay", "concurrency"}
			if !enabled {
				want = append(want, limits...)
			}
			if strings.Join(admitted, ",") != strings.Join(want, ",") {
				t.Errorf("admission reads %v, want %v", admitted, want)
			}
			_, status, _ := get(t, base+"/levee/status.json")
			_, metrics, _ := get(t, base+"/metrics")
			hasStatus, hasMetrics := strings.Contains(status, `"overload":{`), strings.Contains(metrics, "levee_overload_level")
			if (p.Overload() != nil) != enabled || hasStatus != enabled || hasMetrics != enabled {
				t.Errorf("manager %v, in the status JSON %v, in the metrics %v; want all %v", p.Overload() != nil, hasStatus, hasMetrics, enabled)
			}
			if !enabled {
				return
			}
			var resources []string
			for _, r := range p.Overload().Manager().Status().Resources {
				resources = append(resources, r.Name)
			}
			if strings.Join(resources, ",") != strings.Join(limits, ",") {
				t.Errorf("the manager watches %v, want %v", resources, limits)
			}
		})
	}
}
