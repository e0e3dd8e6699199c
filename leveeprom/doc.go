// Package leveeprom exports levee's state as Prometheus metrics, through
// collectors you register on your own prometheus.Registerer (levee never
// touches the global registry):
//
//	ev := leveeprom.NewEventCollector()
//	ctl := admit.New(admit.WithObserver(ev.Observe), …)
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(
//		ev,                                            // server: state changes
//		leveeprom.NewAdmitCollector(ctl),              // server: *admit.Controller
//		leveeprom.NewBudgetCollector(nil),             // client: retry.DefaultBudget()
//	)
//	tc := leveeprom.NewThrottleCollector()
//	tc.AddGroup(throttles)                             // client: *throttle.Group
//	reg.MustRegister(tc)
//
// The collectors read Controller.Snapshot, Throttle.Stats and Budget.Stats
// when Prometheus scrapes, and the EventCollector is called by the
// controller's loop on state changes only; nothing is counted on the
// request path, so a service pays the same per request with metrics as
// without (see BenchmarkAccept and BenchmarkAcceptInterleaved).
//
// # Metrics
//
// Admission (AdmitCollector):
//
//	levee_admissions_total{criticality}             counter  requests admitted
//	levee_rejections_total{criticality,reason}      counter  rejected: overloaded, quota, deadline
//	levee_overload_rejections_total{criticality,stage}
//	                                                counter  the overloaded ones by stage: tenant,
//	                                                         ladder, forced, run_queue, external
//	levee_downstream_overloaded_total               counter  admitted, then overloaded downstream
//	levee_overloaded                                gauge    1 while overloaded
//	levee_shed_level                                gauge    0 (nothing shed) … 4 (all shed)
//	levee_admit_ratio                               gauge    share of sheddable demand let through
//	levee_degradation_level                         gauge    0 normal, 1.. degraded
//	levee_load_ratio                                gauge    max over signals of value / target
//	levee_headroom_ratio                            gauge    1 - levee_load_ratio
//	levee_signal_value{signal}                      gauge    reading, in the signal's unit
//	levee_signal_target{signal}                     gauge    target, in the signal's unit
//	levee_signal_load_ratio{signal}                 gauge    value / target (1 = at target)
//	levee_capacity_requests_per_second              gauge    estimated capacity (goodput / utilisation)
//	levee_shedding_seconds_total                    counter  time spent shedding
//	levee_degraded_seconds_total                    counter  time spent degraded
//	levee_retry_ratio                               gauge    share of arrivals that are retries
//	levee_no_retry                                  gauge    1 while rejections say "don't retry"
//	levee_retry_after_seconds                       gauge    Retry-After given to SHEDDABLE
//	levee_tenant_fair_share_requests_per_second     gauge    capacity / active tenants
//	levee_active_tenants                            gauge    estimated active tenants
//	levee_offered_requests_per_second               gauge    smoothed demand reaching the overload stage
//	levee_tenant_shed_requests_per_second           gauge    shed rate taken from heavy tenants
//	levee_caller_gone_total                         counter  admitted, then the caller gave up
//	levee_learned_routes                            gauge    routes with a learned service time
//	levee_run_queue_running                         gauge    requests holding a run-queue slot
//	levee_run_queue_waiting                         gauge    requests waiting for a slot
//	levee_run_queue_bound                           gauge    requests that may run at once (0: off)
//	levee_dry_run                                   gauge    1 while in dry-run (nothing rejected)
//	levee_would_reject_total{criticality,reason}    counter  admitted in dry-run, would have been rejected
//	levee_would_shed_requests_per_second            gauge    in dry-run, the estimated rate it would shed
//	levee_forced_shed_level                         gauge    shed level forced by a drill (0: none)
//
// Health and readiness probes (ProbeCollector, reading leveehttp's
// Handler.Probes or leveegrpc's Server.Probes):
//
//	levee_health_probes_total                       counter  probes passed through without admission
//	levee_connections_gone_total                    counter  connections closed unread at accept: the peer had gone
//
// Admission state changes (EventCollector, fed by admit.WithObserver):
//
//	levee_state_changes_total{kind}                 counter  overload_start, overload_end, degrade_changed,
//	                                                         drill_start, drill_end, no_retry_start, no_retry_end,
//	                                                         forced_shed_start, forced_shed_end
//
// Configuration and admin endpoint (ConfigCollector):
//
//	levee_config_reloads_total{result}              counter  reloads: applied, rejected, unchanged
//	levee_config_changes_total                      counter  fields changed by applied reloads
//	levee_config_generation                         gauge    generation of the configuration in force
//	levee_config_last_reload_success                gauge    1 if the last reload was not rejected
//	levee_config_applied_timestamp_seconds          gauge    when the configuration in force was applied
//	levee_config_overrides                          gauge    runtime overrides in force (admin)
//	levee_admin_unauthorized_total                  counter  admin requests refused with 401
//	levee_admin_changes_total                       counter  admin requests that changed something
//
// Overload manager (OverloadCollector, reading overload.Manager's Status):
//
//	levee_overload_level                            gauge    0 normal, 1 elevated, 2 high, 3 critical
//	levee_overload_resource_ratio{signal}           gauge    reading against the thresholds (fraction of the limit)
//	levee_overload_resource_used{signal}            gauge    in use, in the resource's unit (bytes, goroutines, descriptors)
//	levee_overload_resource_limit{signal}           gauge    its limit, in the same unit
//	levee_overload_resource_level{signal}           gauge    the level the resource puts the process at
//	levee_overload_action_active{kind}              gauge    1 while the action is active
//	levee_overload_action_active_seconds_total{kind} counter time the action was active
//	levee_overload_refusals_total{criticality,kind} counter  refused by the gate: critical_only, large_body, in_flight
//	levee_overload_in_flight                        gauge    requests in flight through the gate
//	levee_overload_in_flight_cap                    gauge    cap on CRITICAL requests in flight (0: none)
//	levee_overload_collections_total                counter  garbage collections forced for a stale heap reading
//
// Client (ThrottleCollector, BudgetCollector):
//
//	levee_throttle_requests_total{backend,criticality}     counter  attempted, local rejections included
//	levee_throttle_accepts_total{backend,criticality}      counter  accepted by the backend
//	levee_throttle_rejections_total{backend,criticality}   counter  rejected locally, never sent
//	levee_throttle_reject_probability{backend,criticality} gauge    current local rejection probability
//	levee_retry_budget_requests_total                      counter  requests counted by the budget
//	levee_retries_total                                    counter  retries attempted (granted)
//	levee_retries_denied_total                             counter  retries denied by the budget
//
// levee's proxy exports its own metrics with package proxy/proxyprom.
//
// Units are base units (seconds, ratios in 0..1), counters end in _total.
// Label values are bounded: 4 criticalities, 3 or 4 reasons, the signals
// configured, the backends added (a throttle.Group holds a bounded number).
// Tenants never appear as labels. Several controllers in one process are
// told apart with WithConstLabels.
//
// The names, units, help texts and label names are defined once, in
// levee's internal/instrument table, which leveeotel uses too: an
// OpenTelemetry pipeline gets the same instruments, and after
// OpenTelemetry's standard Prometheus translation the same names.
//
// Alerting rules using these metrics are in deploy/prometheus/levee-alerts.yml
// (tickets for capacity; pages only when traffic is shed while less
// critical traffic is admitted about as readily, or CRITICAL_PLUS is shed),
// with unit tests in the format of `promtool test rules`; a Grafana
// dashboard is in deploy/grafana/levee.json. deploy/prometheus/rulecheck
// checks every query of both against these collectors and runs the rule
// tests with Prometheus's rule engine.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), leveeprom is
// an adapter: it reads the policies' snapshots and counters (admit, retry,
// throttle, and the configuration's and admin endpoint's counters) for
// github.com/prometheus/client_golang, its only dependency outside levee,
// and never imports the tools or the command.
package leveeprom
