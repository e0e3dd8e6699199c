// Package config is levee's configuration: a versioned YAML file and
// LEVEE_* environment variables for every tunable, validated with messages
// that name the file, line and field as the user wrote them; reloads that
// are applied whole or rejected whole; and the targets that push a new
// configuration into the running parts (admission controller, signals,
// degradation levels, the overload manager, client throttles, the HTTP
// router).
//
// # The file
//
//	version: 1                  # required: the format this levee reads
//	admit:
//	  dry_run: false            # compute and count, reject nothing
//	  period: 50ms              # restart
//	  quotas:
//	    acme: {rate: 200, burst: 50, by_criticality: {SHEDDABLE: {rate: 20}}}
//	signals:                    # pressure.Default's set; what is not said stays its own
//	  cpu: {target: 0.95}
//	  sched_latency: {target: 50ms}
//	  queue_delay: {target: 0s}   # 0: learned from the CPU per request
//	  concurrency: {latency_ratio: 2}
//	  memory: {target: 0.8}       # against GOMEMLIMIT or the cgroup limit
//	  gc_cpu: {target: 0.3}
//	  goroutines: {limit: 20000}  # none without a limit
//	  open_files: {target: 0.8}
//	degrade: {target: 0.85, max: 3, hold: 1s}
//	overload:                   # the process's own limits (package overload)
//	  enabled: true             # restart; off: admission reads every signal
//	  resources:
//	    memory: {elevated: 0.92, high: 0.95, critical: 0.98, margin: 0.04, goal: 0.9}
//	  actions:
//	    keep_alive_off: {level: high, cooldown: 5s}
//	    critical_only: {level: critical, cooldown: 1s}
//	  body_limit: 1048576
//	http:
//	  health_paths: [/healthz, /readyz, /livez]
//	  trusted_networks: [10.0.0.0/8]
//	  routes:
//	    - {name: checkout, path: /api/checkout, methods: [POST], criticality: CRITICAL_PLUS}
//	    - {name: partner, path: /api/, headers: {X-Api-Key: "*"}, tenant_header: X-Api-Key}
//	admin: {enabled: true, token_file: /run/secrets/levee-admin}
//	reload: {poll: 5s, sighup: false}
//	client:
//	  retry: {max_attempts: 3, base: 100ms, cap: 10s, jitter: full}
//	  budget: {ratio: 0.1, window: 10s, floor: 60, floor_window: 1m}
//	  throttle: {k: 2}
//
// Every field, with its default, is in testdata/defaults.yaml (Default's
// YAML form, checked by a test); each field's Go documentation gives its
// unit and range. Durations need a unit ("50ms", "2s"). Unknown fields are
// rejected with the closest known name ("did you mean"); every problem is
// reported, not only the first:
//
//	config: 3 problems:
//		levee.yaml:4:5: signals.cpu.tagret: unknown field "tagret" (did you mean "target"?)
//		levee.yaml:9:13: admit.quotas.acme.rate: must be in [0, 1e+09], got -3
//		env LEVEE_DEGRADE_MAX: degrade.max: must be a whole number, got "x"
//
// Sections owned by other packages (fleet quotas, the proxy) are
// registered with WithSection and get the same treatment.
//
// # The environment, and precedence
//
// Every field reachable through sections has a variable: LEVEE_ and its
// path in capitals with dots as underscores — signals.cpu.target is
// LEVEE_SIGNALS_CPU_TARGET, admit.dry_run LEVEE_ADMIT_DRY_RUN,
// admin.token LEVEE_ADMIN_TOKEN (EnvVars lists them all). A scalar takes
// the text as it is; a list of scalars takes comma-separated items
// (LEVEE_HTTP_TRUSTED_NETWORKS=10.0.0.0/8,192.168.0.0/16) or a YAML flow
// list; a map or a list of rules takes YAML flow text
// (LEVEE_ADMIT_QUOTAS='{acme: {rate: 200}}'). An empty value counts as
// unset. A LEVEE_ variable within a typo of a known one is reported.
//
// Precedence, lowest first: the defaults, the file, the environment, the
// runtime overrides (the admin endpoint's dry-run switch, WithOverrides).
// Overrides survive reloads of the file until they are cleared.
//
// # Reloads
//
// A Reloader (Open for a file, NewReloader for a Config built in code)
// holds the configuration in force; Current is one atomic load. It reloads
// when the file changes (polled every reload.poll: modification time and
// size, then a hash of the content, so that rewriting the same content is
// nothing and a rejected file is reported once), on SIGHUP when
// reload.sighup is set, when Reload is called (the admin endpoint), and
// when an override is set or cleared. A candidate is validated whole,
// compared with the configuration in force, refused if it changes a field
// tagged reload:"restart" (admit.period, which signals are enabled and
// everything about them but their targets, overload.enabled and
// overload.period, the paths, the client's retry policy and budget), then
// offered to every Target's Check; only when everything accepts it is it
// published and given to every Target's Apply. Otherwise the configuration
// in force stays, and the Result and the log say why, with positions.
// Every applied change is logged field by field (path, old → new; secrets
// redacted) and counted (Stats; leveeprom.NewConfigCollector exports
// levee_config_* metrics).
//
// Write a changed file by renaming a complete file over it (editors and
// Kubernetes ConfigMaps do): a file polled half-written is rejected, then
// applied at the next poll once whole.
//
// # Wiring
//
//	rl, err := config.Open("levee.yaml")
//	cfg := rl.Current()
//	set, err := cfg.Signals.Set()
//	deg := degrade.New(cfg.Degrade.Options()...)
//	// the limits' signals (memory, GC, goroutines, descriptors) go to the overload manager
//	ctl := admit.New(append(cfg.Admit.Options(), admit.WithSignals(set.CPU, set.Sched, set.Queue, set.Concurrency), admit.WithDegrade(deg))...)
//	router := config.NewRouter(cfg)
//	m := overload.New(append(cfg.Overload.Options(), overload.WithResources(overload.Resources(set)...), overload.WithShedder(ctl))...)
//	err = rl.Subscribe(config.ApplySignals(set), config.ApplyDegrade(deg), config.ApplyOverload(m), router)
//	go set.Run(ctx)
//	go ctl.Run(ctx)
//	go m.Run(ctx)
//	go rl.Run(ctx)
//	h := leveehttp.NewHandler(mux, ctl, leveehttp.WithTrust(router.Trusted))
//
// The Router answers on the request path without a lock or an allocation:
// Health(path), Trusted(r), and Classify(r), the first route rule that
// matches (path, methods, headers, client networks): its name, and the
// criticality and tenant it gives untrusted callers (Class.For says how a
// rule's criticality combines with what the caller asked).
//
// # The admin endpoint
//
// leveehttp.NewAdmin(rl, …) serves, under admin.path (default
// /levee/admin), with admin.token as a bearer token or a verified client
// certificate (admin.client_cert), and 401 otherwise:
//
//	T=$(cat /run/secrets/levee-admin)
//	curl -H "Authorization: Bearer $T" localhost:8080/levee/admin/config
//	curl -H "Authorization: Bearer $T" -X POST localhost:8080/levee/admin/reload
//	curl -H "Authorization: Bearer $T" -X PUT -d '{"enabled":true}' localhost:8080/levee/admin/dry-run
//	curl -H "Authorization: Bearer $T" -X DELETE localhost:8080/levee/admin/dry-run
//	curl -H "Authorization: Bearer $T" -X POST -d '{"degrade_level":2,"duration":"30s"}' localhost:8080/levee/admin/drill
//	curl -H "Authorization: Bearer $T" -X POST -d '{"shed_level":1.5,"duration":"1m"}' localhost:8080/levee/admin/drill
//	curl -H "Authorization: Bearer $T" -X DELETE localhost:8080/levee/admin/drill
//
// GET /config returns the effective configuration as JSON with secrets
// redacted, its generation, hash, source and overrides, and the last
// reload's result. POST /reload answers 200 with the changes, or 422 with
// every problem ({"file", "line", "column", "field", "message"}) and the
// configuration in force unchanged. PUT /dry-run sets the admit.dry_run
// override; DELETE /dry-run clears it. POST /drill forces a degradation
// level, a shed level, or both, for a mandatory duration (1s ≤ duration ≤
// admin.max_drill); the drill ends by itself. leveehttp.Admin documents
// the bodies.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only, checked by .ci/layers), config is an
// adapter in the library module: it imports the standard library, the policies
// it configures (admit, degrade, pressure, retry, throttle), the internal
// leaves (wire, suggest) and go.yaml.in/yaml/v3, its one dependency outside
// levee. The other adapters build on it (leveehttp's admin endpoint,
// leveegrpc, leveeprom, leveeotel, proxy), as do the tools and the command in
// cmd/; it never imports them.
package config
