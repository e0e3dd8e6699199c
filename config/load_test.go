package config

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/retry"
)

// problemsOf returns the problems of err as strings, failing the test if
// err is not an *Error.
func problemsOf(t *testing.T, err error) []string {
	t.Helper()
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("error %v (%T) is not a *config.Error", err, err)
	}
	out := make([]string, len(ce.Problems))
	for i, p := range ce.Problems {
		out[i] = p.String()
	}
	return out
}

func TestParseProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		file string
		env  []string
		want []string
	}{
		{
			name: "unknown field with a suggestion",
			file: "version: 1\nsignals:\n  cpu:\n    tagret: 0.9\n",
			want: []string{`f.yaml:4:5: signals.cpu.tagret: unknown field "tagret" (did you mean "target"?)`},
		},
		{
			name: "unknown section",
			file: "version: 1\nadmitt:\n  dry_run: true\n",
			want: []string{`f.yaml:2:1: admitt: unknown section "admitt" (did you mean "admit"?)`},
		},
		{
			name: "unknown field without a near name",
			file: "version: 1\nadmit:\n  zzzzzzzz: 1\n",
			want: []string{`f.yaml:3:3: admit.zzzzzzzz: unknown field "zzzzzzzz"`},
		},
		{
			name: "missing version",
			file: "admit:\n  dry_run: true\n",
			want: []string{"f.yaml: version: missing: add `version: 1` (the format this levee reads)"},
		},
		{
			name: "future version",
			file: "version: 2\n",
			want: []string{"f.yaml:1:10: version: unsupported version 2: this levee reads version 1"},
		},
		{
			name: "out of range, with the value as written",
			file: "version: 1\nsignals:\n  cpu:\n    target: 3\n",
			want: []string{"f.yaml:4:13: signals.cpu.target: must be in (0, 2], got 3"},
		},
		{
			name: "signals pressure.Default builds, with floors above ceilings",
			file: `version: 1
signals:
  queue_delay: {target_floor: 20ms, target_ceiling: 10ms}
  concurrency: {latency_ratio: 1, latency_floor: 0s, latency_ceiling: 2h, min_queue: 0, period: 5ms}
  memory: {target: 1.5, smoothing: -1s}
  gc_cpu: {target: 0, period: 2m}
  goroutines: {limit: -1, target: 2}
  open_files: {target: .nan}
`,
			want: []string{
				"f.yaml:3:53: signals.queue_delay.target_ceiling: must be at least target_floor (20ms), got 10ms",
				"f.yaml:4:32: signals.concurrency.latency_ratio: must be in [1.2, 100], got 1",
				"f.yaml:4:50: signals.concurrency.latency_floor: must be in (0s, 1h], got 0s",
				"f.yaml:4:71: signals.concurrency.latency_ceiling: must be in (0s, 1h], got 2h",
				"f.yaml:4:86: signals.concurrency.min_queue: must be in [1, 1000000], got 0",
				"f.yaml:4:97: signals.concurrency.period: must be in [10ms, 1m], got 5ms",
				"f.yaml:5:20: signals.memory.target: must be in (0, 1], got 1.5",
				"f.yaml:5:36: signals.memory.smoothing: must be in [0s, 1m], got -1s",
				"f.yaml:6:20: signals.gc_cpu.target: must be in (0, 1], got 0",
				"f.yaml:6:31: signals.gc_cpu.period: must be in [10ms, 1m], got 2m",
				"f.yaml:7:23: signals.goroutines.limit: must be in [0, 1000000000], got -1",
				"f.yaml:7:35: signals.goroutines.target: must be in (0, 1], got 2",
				`f.yaml:8:24: signals.open_files.target: must be a finite number, got ".nan"`,
			},
		},
		{
			name: "duration without a unit",
			file: "version: 1\nadmit:\n  period: 50\n",
			want: []string{`f.yaml:3:11: admit.period: "50" needs a unit: a duration such as "50ms", "2s" or "1m"`},
		},
		{
			name: "wrong kind",
			file: "version: 1\nhttp:\n  health_paths: /healthz\n",
			want: []string{`f.yaml:3:17: http.health_paths: must be a list, got "/healthz"`},
		},
		{
			name: "not a boolean",
			file: "version: 1\nadmit:\n  dry_run: yes\n",
			want: []string{`f.yaml:3:12: admit.dry_run: must be true or false, got "yes"`},
		},
		{
			name: "duplicate field",
			file: "version: 1\nadmit:\n  period: 50ms\n  period: 60ms\n",
			want: []string{"f.yaml:4:3: admit.period: duplicate field (first at line 3)"},
		},
		{
			name: "quota tenant keys and criticalities as written",
			file: "version: 1\nadmit:\n  quotas:\n    acme:\n      rate: -1\n      by_criticality:\n        sheddable: {rate: -2}\n        BOGUS: {rate: 1}\n",
			want: []string{
				"f.yaml:5:13: admit.quotas.acme.rate: must be in [0, 1e+09], got -1",
				"f.yaml:7:27: admit.quotas.acme.by_criticality.sheddable.rate: must be in [0, 1e+09], got -2",
				`f.yaml:8:9: admit.quotas.acme.by_criticality.BOGUS: bad key: bad criticality "BOGUS"`,
			},
		},
		{
			name: "networks and route rules",
			file: "version: 1\nhttp:\n  trusted_networks: [10.0.0.1/8, nonsense]\n  routes:\n    - path: api\n      criticality: CRITICAL_PLUSS\n",
			want: []string{
				`f.yaml:3:22: http.trusted_networks[0]: "10.0.0.1/8" has host bits set; did you mean "10.0.0.0/8"?`,
				`f.yaml:3:34: http.trusted_networks[1]: "nonsense" is not an IP address or a CIDR network such as 10.0.0.0/8`,
				"f.yaml:5:7: http.routes[0].name: missing: every route rule needs a name",
				`f.yaml:5:13: http.routes[0].path: must start with /, got "api"`,
				`f.yaml:6:20: http.routes[0].criticality: must be CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE or 4..1, got "CRITICAL_PLUSS" (did you mean "CRITICAL_PLUS"?)`,
			},
		},
		{
			name: "admin without credentials",
			file: "version: 1\nadmin:\n  enabled: true\n",
			want: []string{"f.yaml:3:12: admin.enabled: the admin endpoint needs admin.token (or token_file) or admin.client_cert.enabled: it never runs open"},
		},
		{
			name: "short admin token",
			file: "version: 1\nadmin:\n  enabled: true\n  token: short\n",
			want: []string{"f.yaml:4:10: admin.token: must be at least 16 characters"},
		},
		{
			name: "environment after the file",
			file: "version: 1\nsignals:\n  cpu:\n    target: 3\n",
			env:  []string{"LEVEE_DEGRADE_MAX=x", "LEVEE_SIGNALS_CPU_TARGT=0.9", "LEVEE_UNRELATED_TOOL=1"},
			want: []string{
				"f.yaml:4:13: signals.cpu.target: must be in (0, 2], got 3",
				`env LEVEE_DEGRADE_MAX: degrade.max: must be a whole number, got "x"`,
				`env LEVEE_SIGNALS_CPU_TARGT: unknown variable (did you mean "LEVEE_SIGNALS_CPU_TARGET"?)`,
			},
		},
		{
			name: "overload section",
			file: `version: 1
overload:
  period: 5ms
  resources:
    memory: {elevated: 0.95, high: 0.9, critical: 0, margin: 0, goal: 1.5}
  actions:
    shed: {level: hihg, cooldown: -1s}
    keep_alive: {level: high}
  shed_floors: {elevated: 2, high: 1, critical: 5}
  body_limit: 0
  in_flight_shares: {sheddable: 0.9, sheddable_plus: 0.8}
`,
			env: []string{"LEVEE_OVERLOAD_ACTIONS_COLLECT_LEVEL=sometimes"},
			want: []string{
				`f.yaml:3:11: overload.period: must be in [10ms, 10s], got 5ms`,
				`f.yaml:5:36: overload.resources.memory.high: must be at least elevated (0.95), got 0.9`,
				`f.yaml:5:62: overload.resources.memory.margin: must be in (0, 0.5], got 0`,
				`f.yaml:5:71: overload.resources.memory.goal: must be in [0, 1], got 1.5`,
				`f.yaml:7:19: overload.actions.shed.level: unknown level "hihg" (want off, normal, elevated, high or critical)`,
				`f.yaml:7:35: overload.actions.shed.cooldown: must be in [0s, 10m], got -1s`,
				`f.yaml:8:5: overload.actions.keep_alive: unknown field "keep_alive" (did you mean "keep_alive_off"?)`,
				`f.yaml:9:36: overload.shed_floors.high: must be at least elevated (2), got 1`,
				`f.yaml:9:49: overload.shed_floors.critical: must be in [0, 4], got 5`,
				`f.yaml:10:15: overload.body_limit: must be in [1, 1099511627776], got 0`,
				`f.yaml:11:54: overload.in_flight_shares.sheddable_plus: must be at least sheddable (0.9), got 0.8`,
				`env LEVEE_OVERLOAD_ACTIONS_COLLECT_LEVEL: overload.actions.collect.level: unknown level "sometimes" (want off, normal, elevated, high or critical)`,
			},
		},
		{
			name: "syntax error",
			file: "version: 1\nadmit:\n  period: [50ms\n",
			want: []string{"f.yaml:2: not valid YAML: did not find expected ',' or ']'"},
		},
		{
			name: "empty file",
			file: "",
			want: []string{"f.yaml: the file is empty; it needs at least `version: 1`"},
		},
		{
			name: "two documents",
			file: "version: 1\n---\nversion: 1\n",
			want: []string{"f.yaml:2: more than one YAML document: a configuration is one document"},
		},
		{
			name: "merge keys",
			file: "version: 1\nadmit:\n  <<: {dry_run: true}\n",
			want: []string{"f.yaml:3:3: admit: merge keys (<<) are not supported: write the fields out"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(tc.file), WithEnv(tc.env))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			got := problemsOf(t, err)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestEveryProblemReported checks that problems do not stop at the first:
// one file with a problem in every section reports them all.
func TestEveryProblemReported(t *testing.T) {
	file := `version: 1
admit: {period: 0s}
signals: {cpu: {target: 0}, sched_latency: {target: 0s}, queue_delay: {target: -1s}}
degrade: {target: 2}
http: {health_paths: [healthz]}
admin: {max_drill: 0s}
reload: {poll: 1ms}
client: {retry: {max_attempts: 0}, budget: {ratio: 2}, throttle: {k: 0.5}}
`
	_, err := Parse("f.yaml", []byte(file), WithEnv(nil))
	got := problemsOf(t, err)
	if len(got) != 11 {
		t.Errorf("%d problems, want 11:\n%s", len(got), strings.Join(got, "\n"))
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte("version: 1\n"), WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Errorf("a file with only a version differs from Default():\n%s", cfg.YAML(false))
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	if err := (&Config{}).Validate(); err == nil {
		t.Error("a zero Config validates; want an error saying to start from Default()")
	}
}

// testOtherDefaults is TestDefaultsMatchPackages for the sections other
// than signals.
func testOtherDefaults(t *testing.T) {
	d := Default()
	deg, plain := degrade.New(d.Degrade.Options()...), degrade.New()
	if deg.Target() != plain.Target() || deg.Max() != plain.Max() {
		t.Errorf("degrade from Default: target %v max %v, degrade.New(): %v %v", deg.Target(), deg.Max(), plain.Target(), plain.Max())
	}
	for n := 1; n <= 3; n++ {
		if got, want := d.Client.Retry.Policy().Ceiling(n), (retry.Policy{}).Ceiling(n); got != want {
			t.Errorf("retry policy from Default: Ceiling(%d) = %v, the zero Policy's %v", n, got, want)
		}
	}
}

func TestPrecedence(t *testing.T) {
	file := "version: 1\nsignals:\n  cpu:\n    target: 0.8\nadmit:\n  dry_run: false\nhttp:\n  health_paths: [/ping]\n"
	for _, tc := range []struct {
		name      string
		env       []string
		overrides map[string]string
		target    float64
		dryRun    bool
		health    []string
	}{
		{name: "file", target: 0.8, health: []string{"/ping"}},
		{name: "env over file", env: []string{"LEVEE_SIGNALS_CPU_TARGET=0.7", "LEVEE_HTTP_HEALTH_PATHS=/a, /b"}, target: 0.7, health: []string{"/a", "/b"}},
		{name: "env flow list", env: []string{"LEVEE_HTTP_HEALTH_PATHS=[/x]"}, target: 0.8, health: []string{"/x"}},
		{name: "empty env is unset", env: []string{"LEVEE_SIGNALS_CPU_TARGET="}, target: 0.8, health: []string{"/ping"}},
		{name: "override over env", env: []string{"LEVEE_SIGNALS_CPU_TARGET=0.7", "LEVEE_ADMIT_DRY_RUN=false"},
			overrides: map[string]string{"signals.cpu.target": "0.6", "admit.dry_run": "true"}, target: 0.6, dryRun: true, health: []string{"/ping"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("f.yaml", []byte(file), WithEnv(tc.env), WithOverrides(tc.overrides))
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Signals.CPU.Target != tc.target || cfg.Admit.DryRun != tc.dryRun || !reflect.DeepEqual(cfg.HTTP.HealthPaths, tc.health) {
				t.Errorf("target %v dry-run %v health %q, want %v %v %q", cfg.Signals.CPU.Target, cfg.Admit.DryRun, cfg.HTTP.HealthPaths, tc.target, tc.dryRun, tc.health)
			}
		})
	}
}

func TestEnvCompound(t *testing.T) {
	env := []string{
		"LEVEE_ADMIT_QUOTAS={acme: {rate: 100, burst: 10, by_criticality: {SHEDDABLE: {rate: 5}}}}",
		"LEVEE_HTTP_ROUTES=[{name: batch, path: /batch/, criticality: SHEDDABLE}]",
		"LEVEE_HTTP_TRUSTED_NETWORKS=10.0.0.0/8,192.0.2.7",
	}
	cfg, err := Resolve(Default(), WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	q := cfg.Admit.QuotaMap()["acme"]
	if q.Rate != 100 || q.Burst != 10 || q.ByCriticality[levee.Sheddable].Rate != 5 {
		t.Errorf("quota from the environment = %+v", q)
	}
	if len(cfg.HTTP.Routes) != 1 || cfg.HTTP.Routes[0].Path != "/batch/" {
		t.Errorf("routes from the environment = %+v", cfg.HTTP.Routes)
	}
	if got := []string{cfg.HTTP.TrustedNetworks[0].String(), cfg.HTTP.TrustedNetworks[1].String()}; !reflect.DeepEqual(got, []string{"10.0.0.0/8", "192.0.2.7/32"}) {
		t.Errorf("trusted networks from the environment = %q", got)
	}
	_, err = Resolve(Default(), WithEnv([]string{"LEVEE_ADMIT_QUOTAS={acme: {rate: x}}"}))
	if got := problemsOf(t, err); !reflect.DeepEqual(got, []string{`env LEVEE_ADMIT_QUOTAS: admit.quotas.acme.rate: must be a finite number, got "x"`}) {
		t.Errorf("problems = %q", got)
	}
}

// TestEnvNames checks that every field has its own variable.
func TestEnvNames(t *testing.T) {
	vars := EnvVars(WithSection("fleet", func() any { return &testSection{} }))
	seen := map[string]string{}
	for path, env := range vars {
		if other, dup := seen[env]; dup {
			t.Errorf("%s and %s share the variable %s", path, other, env)
		}
		seen[env] = path
	}
	for path, want := range map[string]string{
		"signals.cpu.target":                "LEVEE_SIGNALS_CPU_TARGET",
		"signals.gc_cpu.target":             "LEVEE_SIGNALS_GC_CPU_TARGET",
		"signals.open_files.enabled":        "LEVEE_SIGNALS_OPEN_FILES_ENABLED",
		"signals.goroutines.limit":          "LEVEE_SIGNALS_GOROUTINES_LIMIT",
		"signals.concurrency.latency_ratio": "LEVEE_SIGNALS_CONCURRENCY_LATENCY_RATIO",
		"signals.queue_delay.target_floor":  "LEVEE_SIGNALS_QUEUE_DELAY_TARGET_FLOOR",
		"admit.dry_run":                     "LEVEE_ADMIT_DRY_RUN",
		"admin.token":                       "LEVEE_ADMIN_TOKEN",
		"fleet.redis.address":               "LEVEE_FLEET_REDIS_ADDRESS",
		"overload.actions.shed.level":       "LEVEE_OVERLOAD_ACTIONS_SHED_LEVEL",
		"overload.resources.gc_cpu.goal":    "LEVEE_OVERLOAD_RESOURCES_GC_CPU_GOAL",
	} {
		if vars[path] != want {
			t.Errorf("variable of %s = %q, want %q", path, vars[path], want)
		}
	}
}

func TestOverrideUnknownField(t *testing.T) {
	_, err := Resolve(Default(), WithOverrides(map[string]string{"admit.dryrun": "true"}))
	want := []string{`admin: admit.dryrun: no such field (did you mean "admit.dry_run"?)`}
	if got := problemsOf(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.yaml"), WithEnv(nil)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
	big := filepath.Join(dir, "big.yaml")
	if err := os.WriteFile(big, make([]byte, MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big, WithEnv(nil)); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load of a file over MaxFileSize: %v", err)
	}
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("  0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "levee.yaml")
	if err := os.WriteFile(f, []byte("version: 1\nadmin:\n  enabled: true\n  token_file: "+tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(f, WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Admin.Token != "0123456789abcdef0123" {
		t.Errorf("token from token_file = %q", cfg.Admin.Token)
	}
	if strings.Contains(string(cfg.JSON()), "0123456789abcdef0123") || strings.Contains(string(cfg.YAML(true)), "0123456789abcdef0123") {
		t.Error("the redacted forms show the token")
	}
	if !strings.Contains(string(cfg.YAML(false)), "0123456789abcdef0123") {
		t.Error("the file form lost the token")
	}
}

func TestAlias(t *testing.T) {
	cfg, err := Parse("f.yaml", []byte("version: 1\nx: &d 40ms\nadmit:\n  period: *d\n"), WithEnv(nil))
	if err == nil {
		t.Fatalf("an unknown top-level key with an anchor parsed: %+v", cfg.Admit)
	}
	cfg, err = Parse("f.yaml", []byte("version: 1\nsignals:\n  cpu: {period: &p 40ms}\n  sched_latency: {period: *p}\n"), WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Signals.SchedLatency.Period != 40*time.Millisecond {
		t.Errorf("aliased period = %v, want 40ms", cfg.Signals.SchedLatency.Period)
	}
	// An alias bomb: each level doubles the nodes.
	var b strings.Builder
	b.WriteString("version: 1\nhttp:\n  health_paths: &a0 [/x, /x]\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&b, "  x%d: &a%d [*a%d, *a%d]\n", i, i, i-1, i-1)
	}
	_, err = Parse("f.yaml", []byte(b.String()), WithEnv(nil))
	if err == nil {
		t.Fatal("an alias bomb parsed")
	}
}

// testSection is a registered section, as fleet quotas would register.
type testSection struct {
	Enabled bool          `yaml:"enabled"`
	Period  time.Duration `yaml:"period" reload:"restart"`
	Redis   struct {
		Address  string `yaml:"address"`
		Password string `yaml:"password" config:"secret"`
	} `yaml:"redis"`
	Tenants map[string]struct {
		Cores float64 `yaml:"cores"`
	} `yaml:"tenants"`
}

func (s *testSection) Validate(v *Validator) {
	for name, t := range s.Tenants {
		if t.Cores <= 0 {
			v.Sub("tenants").Sub(name).Errorf("cores", "must be > 0, got %g", t.Cores)
		}
	}
}

func TestSection(t *testing.T) {
	defaults := func() any { return &testSection{Period: time.Second} }
	file := "version: 1\nfleet:\n  redis: {address: 127.0.0.1:6379, password: hunter2hunter2}\n  tenants:\n    acme: {cores: 0}\n    big.co: {cores: 2}\n  perod: 2s\n"
	_, err := Parse("f.yaml", []byte(file), WithEnv(nil), WithSection("fleet", defaults))
	want := []string{
		"f.yaml:5:19: fleet.tenants.acme.cores: must be > 0, got 0",
		`f.yaml:7:3: fleet.perod: unknown field "perod" (did you mean "period"?)`,
	}
	if got := problemsOf(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("problems:\n got %q\nwant %q", got, want)
	}
	file = strings.Replace(file, "perod", "period", 1)
	file = strings.Replace(file, "cores: 0", "cores: 1", 1)
	cfg, err := Parse("f.yaml", []byte(file), WithEnv([]string{"LEVEE_FLEET_ENABLED=true"}), WithSection("fleet", defaults))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Section("fleet").(*testSection)
	if !s.Enabled || s.Period != 2*time.Second || s.Tenants["big.co"].Cores != 2 || s.Redis.Password != "hunter2hunter2" {
		t.Errorf("section = %+v", s)
	}
	if strings.Contains(string(cfg.JSON()), "hunter2") {
		t.Error("the section's secret shows in JSON")
	}
	if _, err := Parse("f.yaml", []byte(file), WithEnv(nil)); err == nil {
		t.Error("a file with an unregistered section parsed")
	}
	back, err := Parse("g.yaml", cfg.YAML(false), WithEnv(nil), WithSection("fleet", defaults))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip changed the section: %+v, want %+v", back.Section("fleet"), s)
	}
}

func TestRoundTrip(t *testing.T) {
	cfg := Default()
	cfg.Admit.DryRun = true
	cfg.Admit.Quotas = map[string]Quota{
		"acme":                  {Rate: 100, Burst: 20, ByCriticality: map[levee.Criticality]Limit{levee.Sheddable: {Rate: 1.5}}},
		"tenant with spaces.io": {Rate: 0.25},
	}
	cfg.HTTP.TrustedNetworks = []Network{mustNet(t, "10.0.0.0/8"), mustNet(t, "2001:db8::/32")}
	cfg.HTTP.Routes = []Route{{Name: "null", Path: "/api/", Methods: []string{"GET"}, Headers: map[string]string{"X-Key": "*"}, Criticality: "SHEDDABLE", TenantHeader: "X-Key"}}
	cfg.Admin.Token = "0123456789abcdef"
	cfg.Client.Retry.Jitter = "none"
	back, err := Parse("f.yaml", cfg.YAML(false), WithEnv(nil))
	if err != nil {
		t.Fatalf("%v\n%s", err, cfg.YAML(false))
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("round trip differs:\n%s\nwant\n%s", back.YAML(false), cfg.YAML(false))
	}
}

func mustNet(t *testing.T, s string) Network {
	t.Helper()
	n, err := ParseNetwork(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDiff(t *testing.T) {
	a := Default()
	b := Default()
	b.Signals.CPU.Target = 0.9
	b.Admit.Period = 100 * time.Millisecond
	b.Admin.Token = "0123456789abcdef"
	b.Admit.Quotas = map[string]Quota{"acme": {Rate: 5}}
	b.HTTP.HealthPaths = []string{"/healthz"}
	want := []Change{
		{Path: "admin.token", Old: `""`, New: Redacted},
		{Path: "admit.period", Old: "50ms", New: "100ms", Restart: true},
		{Path: "admit.quotas.acme", Old: absent, New: "{rate: 5, burst: 0, by_criticality: {}}"},
		{Path: "http.health_paths", Old: "[/healthz, /readyz, /livez]", New: "[/healthz]"},
		{Path: "signals.cpu.target", Old: "0.95", New: "0.9"},
	}
	if got := Diff(a, b); !reflect.DeepEqual(got, want) {
		t.Errorf("Diff:\n got %v\nwant %v", got, want)
	}
	if got := Diff(a, a.Clone()); len(got) != 0 {
		t.Errorf("Diff of a config and its clone = %v", got)
	}
}

func TestOptions(t *testing.T) {
	cfg := Default()
	cfg.Admit.Quotas = map[string]Quota{"acme": {Rate: 1, Burst: 1}}
	ctl := admit.New(append(cfg.Admit.Options(), admit.WithSeed(1))...)
	t0 := time.Unix(1000, 0)
	ctx := levee.WithCall(t.Context(), levee.Call{Tenant: "acme"})
	if _, err := ctl.AdmitAt(ctx, t0); err != nil {
		t.Fatalf("first request over a quota of 1: %v", err)
	}
	if _, err := ctl.AdmitAt(ctx, t0); !errors.Is(err, levee.ErrQuota) {
		t.Errorf("second request at once: %v, want a quota rejection", err)
	}
}

func TestProblemsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nhttp:\n  health_paths:\n")
	for range 200 {
		b.WriteString("    - nope\n")
	}
	_, err := Parse("f.yaml", []byte(b.String()), WithEnv(nil))
	got := problemsOf(t, err)
	if len(got) != maxProblems+1 || got[maxProblems] != "150 more problems not listed" {
		t.Errorf("%d problems, last %q; want %d and a count of the rest", len(got), got[len(got)-1], maxProblems+1)
	}
}

var update = flag.Bool("update", false, "rewrite testdata/defaults.yaml")

// TestDefaultsFile keeps testdata/defaults.yaml, the reference of every
// field and its default, equal to Default.
func TestDefaultsFile(t *testing.T) {
	got := Default().YAML(false)
	path := filepath.Join("testdata", "defaults.yaml")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s is stale (go test ./config -run TestDefaultsFile -update):\n%s", path, got)
	}
	cfg, err := Load(path, WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, Default()) {
		t.Error("testdata/defaults.yaml does not load to Default()")
	}
}

// plainSection validates itself the usual Go way.
type plainSection struct {
	Tenants map[string]float64 `yaml:"tenants"`
}

func (p *plainSection) Validate() error {
	for name, v := range p.Tenants {
		if v <= 0 {
			return fmt.Errorf("tenant %q: cores must be > 0", name)
		}
	}
	return nil
}

func TestSectionPlainValidate(t *testing.T) {
	_, err := Parse("f.yaml", []byte("version: 1\nquotas:\n  tenants: {acme: 0}\n"), WithEnv(nil),
		WithSection("quotas", func() any { return &plainSection{} }))
	want := []string{`f.yaml:3:3: quotas: tenant "acme": cores must be > 0`}
	if got := problemsOf(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("problems = %q, want %q", got, want)
	}
}
