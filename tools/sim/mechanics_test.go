package sim

import (
	"strings"
	"testing"
)

func parse(t *testing.T, y string) *Scenario {
	t.Helper()
	s, err := Parse([]byte(y))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, y)
	}
	return s
}

// The model's mechanics, each on a small custom topology.
func TestMechanics(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		check func(t *testing.T, r *Report)
	}{
		{
			name: "failover moves the load of a down active to the standby",
			yaml: `name: failover
phases: [{name: up, duration: 5s}, {name: down, duration: 5s}]
clients: [{name: c, rate_rps: 200, target: db, timeout: 1s}]
tiers: [{name: db, instances: 2, cores: 2, service: {mean: 1ms}, lb: {policy: failover}}]
events: [{at: 5s, kind: crash, tier: db, instance: 0}]
runs: [{name: none, protection: none}]
`,
			check: func(t *testing.T, r *Report) {
				in := r.Runs[0].Series.Instances
				if in[1].ReceivedRPS[2] != 0 || in[0].ReceivedRPS[2] == 0 {
					t.Errorf("before the crash: active %v, standby %v; want all on the active", in[0].ReceivedRPS[2], in[1].ReceivedRPS[2])
				}
				if in[1].ReceivedRPS[7] < 150 || in[0].ReceivedRPS[7] != 0 {
					t.Errorf("after the crash: active %v, standby %v; want all on the standby", in[0].ReceivedRPS[7], in[1].ReceivedRPS[7])
				}
				if g := r.Runs[0].Phases[1].GoodputRPS; g < 190 {
					t.Errorf("goodput after failover %.0f, want ≈ 200", g)
				}
			},
		},
		{
			name: "failover spills the load of a saturated active to the standby",
			yaml: `name: spill
phases: [{name: all, duration: 10s}]
clients: [{name: c, rate_rps: 300, target: db, timeout: 5s}]
tiers: [{name: db, instances: 2, cores: 1, service: {dist: const, mean: 5ms}, lb: {policy: failover, saturated: 5}}]
runs: [{name: none, protection: none}]
`,
			check: func(t *testing.T, r *Report) {
				in := r.Runs[0].Instances
				if in[0].Served < 1800 || in[1].Served < 500 {
					t.Errorf("active served %d, standby %d; want the active near its 200/s and the rest spilled", in[0].Served, in[1].Served)
				}
				if g := r.Runs[0].Phases[0].GoodputRPS; g < 290 {
					t.Errorf("goodput %.0f, want ≈ 300", g)
				}
			},
		},
		{
			name: "a slow dependency raises latency while it lasts",
			yaml: `name: slow
phases: [{name: before, duration: 4s}, {name: slow, duration: 4s}, {name: after, duration: 4s}]
clients: [{name: c, rate_rps: 100, target: app, timeout: 5s}]
tiers:
  - {name: app, cores: 8, service: {dist: const, mean: 1ms}, downstream: {target: db, timeout: 5s}}
  - {name: db, cores: 8, service: {dist: const, mean: 10ms}}
events: [{at: 4s, kind: slow, tier: db, factor: 5, duration: 4s}]
runs: [{name: none, protection: none}]
`,
			check: func(t *testing.T, r *Report) {
				p := r.Runs[0].Phases
				if p[0].Latency.Mean > 0.02 || p[1].Latency.Mean < 0.045 || p[2].Latency.Mean > 0.02 {
					t.Errorf("latencies %.3f, %.3f, %.3f; want ≈ 0.011, ≈ 0.051, ≈ 0.011", p[0].Latency.Mean, p[1].Latency.Mean, p[2].Latency.Mean)
				}
			},
		},
		{
			name: "health checks kill a slow instance",
			yaml: `name: kill
phases: [{name: all, duration: 10s}]
clients: [{name: c, rate_rps: 300, target: app, timeout: 10s}]
tiers: [{name: app, cores: 1, service: {dist: const, mean: 5ms}, lb: {kill_slow: {latency: 500ms, checks: 2, interval: 1s}}}]
runs: [{name: none, protection: none}]
`,
			check: func(t *testing.T, r *Report) {
				ev := r.Runs[0].CrashEvents
				if len(ev) == 0 || ev[0].Kind != "health-check" || !strings.Contains(ev[0].Cause, "over 500ms for 2 checks") {
					t.Fatalf("crashes %+v, want a health-check kill", ev)
				}
			},
		},
		{
			name: "a restarted instance starts cold",
			yaml: `name: cold
phases: [{name: all, duration: 12s}]
clients: [{name: c, rate_rps: 100, target: app, timeout: 5s}]
tiers: [{name: app, cores: 4, service: {dist: const, mean: 10ms}, restart: 1s, cold_start: {factor: 0.25, duration: 10s}}]
events: [{at: 1500ms, kind: crash, tier: app, duration: 1s}]
runs: [{name: none, protection: none}]
`,
			check: func(t *testing.T, r *Report) {
				st := r.Runs[0].Series.Instances[0].State
				if st[0] != 0 || st[1] != 2 || st[2] != 2 || st[3] != 1 {
					t.Errorf("states %v, want up, down, then warming up", st)
				}
			},
		},
		{
			name: "over the memory limit an instance crashes and says why",
			yaml: `name: oom
phases: [{name: all, duration: 5s}]
clients: [{name: c, rate_rps: 400, target: app, timeout: 30s}]
tiers: [{name: app, cores: 1, service: {dist: const, mean: 5ms}, memory_limit: 100, restart: 10s}]
runs: [{name: none, protection: none}]
`,
			check: func(t *testing.T, r *Report) {
				ev := r.Runs[0].CrashEvents
				if len(ev) != 1 || ev[0].Kind != "memory" || !strings.Contains(ev[0].Cause, "in-flight 101 over memory limit 100") {
					t.Fatalf("crashes %+v, want one memory crash", ev)
				}
				if r.Runs[0].Crashes != 1 {
					t.Errorf("crashes %d, want 1", r.Runs[0].Crashes)
				}
			},
		},
		{
			name: "work for clients that gave up is wasted unless the server drops it",
			yaml: `name: waste
phases: [{name: all, duration: 20s}]
clients: [{name: c, rate_rps: 300, target: app, timeout: 300ms}]
tiers: [{name: app, cores: 1, service: {dist: const, mean: 5ms}}]
runs: [{name: none, protection: none}, {name: levee, protection: levee, throttle: false}]
`,
			check: func(t *testing.T, r *Report) {
				un, lv := r.Runs[0], r.Runs[1]
				if un.WastedWorkShare < 0.5 {
					t.Errorf("unprotected wasted %.2f of its CPU, want most of it (the queue only grows)", un.WastedWorkShare)
				}
				if lv.WastedWorkShare > 0.05 {
					t.Errorf("levee wasted %.2f of its CPU, want ≈ 0", lv.WastedWorkShare)
				}
				if g := lv.Phases[0].GoodputRPS; g < 120 {
					t.Errorf("levee goodput %.0f/s, want near the capacity of 200/s", g)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, Run(parse(t, tt.yaml), Options{Seed: 1, Parallel: 1}))
		})
	}
}

// The presentations of a report: tables, HTML with charts, one SVG.
func TestWriters(t *testing.T) {
	s := parse(t, `name: small
phases: [{name: a, duration: 3s}, {name: b, duration: 3s}]
trigger: a
clients: [{name: c, rate_rps: 100, target: app, timeout: 1s, criticality: {CRITICAL: 1, SHEDDABLE: 1}}]
tiers: [{name: app, cores: 1, service: {mean: 5ms}, memory_limit: 50}]
events: [{at: 1s, kind: slow, tier: app, factor: 10, duration: 1s}]
`)
	r := Run(s, Options{Seed: 1})
	var tb, hb, sb strings.Builder
	if err := r.WriteTable(&tb); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sim small (seed 1", "offered/s", "goodput ÷ offered per criticality", "SHEDDABLE"} {
		if !strings.Contains(tb.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, tb.String())
		}
	}
	if err := r.WriteHTML(&hb); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(hb.String(), "<svg"); n != 14 {
		t.Errorf("HTML has %d charts, want 14 (7 per run: requests, and per instance received, served, utilisation, queueing delay, in flight, state)", n)
	}
	if err := r.WriteSVG(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sb.String(), "<svg") {
		t.Errorf("SVG starts with %.20q", sb.String())
	}
}
