package config

import (
	"errors"
	"reflect"
	"testing"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// FuzzLoad feeds the parser arbitrary files and environments. It must
// never panic; a file it accepts must validate, come back unchanged
// through its own YAML form, and build every package's options without
// their range checks firing; a file it refuses must say why, with a
// problem that has a message.
func FuzzLoad(f *testing.F) {
	f.Add([]byte("version: 1\n"), "")
	f.Add([]byte(routerFile), "LEVEE_SIGNALS_CPU_TARGET=0.9")
	f.Add([]byte(baseFile), "LEVEE_ADMIT_QUOTAS={a: {rate: 1}}")
	f.Add([]byte("version: 1\nadmit:\n  quotas:\n    acme: {rate: 10, burst: 5, by_criticality: {SHEDDABLE: {rate: 1}}}\n"), "LEVEE_HTTP_HEALTH_PATHS=/a,/b")
	f.Add([]byte("version: 1\nx: &a [*a]\n"), "")
	f.Add([]byte("version: 1\nadmin: {enabled: true, token: 0123456789abcdef, client_cert: {enabled: true, names: [a]}}\n"), "LEVEE_ADMIN_TOKEN=")
	f.Add([]byte("version: 1\nhttp:\n  routes:\n    - {name: r, path: /x/, headers: {A: '*'}, networks: [::1]}\n"), "LEVEE_HTTP_ROUTES=[{name: z}]")
	f.Add([]byte("version: 1\nsignals:\n  queue_delay: {target: 0s, target_floor: 1ms, target_ceiling: 1ms}\n  concurrency: {latency_ratio: 1.2, latency_floor: 1h, latency_ceiling: 1h, min_queue: 1}\n  memory: {enabled: false}\n  gc_cpu: {target: 1, smoothing: 0s}\n  goroutines: {limit: 1, target: 1}\n  open_files: {period: 10ms}\n"), "LEVEE_SIGNALS_GOROUTINES_LIMIT=1000000000")
	f.Add([]byte("version: 1\nsignals: {cpu: {enabled: false}, concurrency: {enabled: false}, queue_delay: {target: 1m}}\n"), "LEVEE_SIGNALS_QUEUE_DELAY_TARGET_CEILING=1m")
	f.Add([]byte("version: 1\noverload:\n  resources:\n    memory: {elevated: 0, high: 0.5, critical: 0.5, margin: 0.5, goal: 1}\n  actions: {shed: {level: off}, collect: {level: critical, cooldown: 10m}}\n  shed_floors: {elevated: 0, high: 4, critical: 4}\n  in_flight_shares: {sheddable: 1, sheddable_plus: 1}\n"), "LEVEE_OVERLOAD_ACTIONS_IN_FLIGHT_LEVEL=high")
	f.Add([]byte("version: 1\noverload: {enabled: false, period: 10s, body_limit: 1, idle_timeout: 10ms, header_timeout: 1h, min_in_flight: 1000000}\n"), "LEVEE_OVERLOAD_RESOURCES_GC_CPU_ELEVATED=0.2")
	f.Fuzz(func(t *testing.T, file []byte, env string) {
		envs := []string{env}
		cfg, err := Parse("f.yaml", file, WithEnv(envs))
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) == 0 {
				t.Fatalf("error %v is not an *Error with problems", err)
			}
			for _, p := range ce.Problems {
				if p.Message == "" {
					t.Fatalf("problem without a message: %+v", p)
				}
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
		back, err := Parse("g.yaml", cfg.YAML(false), WithEnv(nil))
		if err != nil {
			t.Fatalf("its own YAML does not parse: %v\n%s", err, cfg.YAML(false))
		}
		if !reflect.DeepEqual(back, cfg) {
			t.Fatalf("round trip changed the config:\n%s\nback:\n%s", cfg.YAML(false), back.YAML(false))
		}
		if d := Diff(cfg, back); len(d) != 0 {
			t.Fatalf("Diff of equal configs: %v", d)
		}
		_ = cfg.JSON()
		_ = NewRouter(cfg)
		// The packages' options panic on values out of their ranges: an
		// accepted config must stay inside them.
		admit.New(cfg.Admit.Options()...)
		degrade.New(cfg.Degrade.Options()...)
		retry.NewBudget(cfg.Client.Budget.Options()...)
		throttle.New(cfg.Client.Throttle.Options()...)
		overload.New(cfg.Overload.Options()...)
		if _, err := cfg.Signals.Set(); err != nil {
			t.Fatalf("signals of an accepted config: %v", err)
		}
	})
}
