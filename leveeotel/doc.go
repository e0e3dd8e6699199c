// Package leveeotel exports levee's state as OpenTelemetry metrics: the
// same instruments as package leveeprom, with the same names, units, label
// (attribute) names and values, read by observable instruments when the
// SDK collects. It is a module of its own, so that a service that exports
// only to Prometheus does not carry OpenTelemetry, and one that exports
// only to OpenTelemetry needs no Prometheus registry.
//
//	meter := provider.Meter(leveeotel.Scope)
//	ev := new(leveeotel.Events)
//	ctl := admit.New(admit.WithObserver(ev.Observe), …)
//	reg, err := leveeotel.ObserveAdmit(meter, ctl)        // server: *admit.Controller
//	_, err = leveeotel.ObserveEvents(meter, ev)           // server: state changes
//	_, err = leveeotel.ObserveBudget(meter, nil)          // client: retry.DefaultBudget()
//	ts := new(leveeotel.Throttles)
//	ts.AddGroup(throttles)                                // client: *throttle.Group
//	_, err = leveeotel.ObserveThrottles(meter, ts)
//	_, err = leveeotel.ObserveProbes(meter, handler.Probes)    // health probes let through
//	_, err = leveeotel.ObserveConfig(meter, reloader, admin)  // configuration reloads, admin endpoint
//	…
//	reg.Unregister()                                      // stop observing ctl
//
// The instruments read Controller.Snapshot, Throttle.Stats, Budget.Stats
// and the other counters in the SDK's collection callback; nothing is counted on the request path,
// so a service pays the same per request with the bridge as without.
//
// # Names and units
//
// The instrument names are leveeprom's metric names (levee_admissions_total,
// levee_shed_level, …; the full list is in leveeprom's documentation), and
// both packages take them from one table. Counters are observable counters
// (monotonic sums), gauges observable gauges, all float64. Units are UCUM:
// "s" on the _seconds instruments, "1" on the _ratio gauges, annotations
// such as "{request}" on counts and "{request/s}" on the rates, "" where
// the value has no single unit (levee_signal_value is in each signal's own
// unit). They are chosen so that OpenTelemetry's standard translation to
// Prometheus names (as done by its Prometheus exporter and by Prometheus's
// OTLP receiver) gives back exactly leveeprom's names: the alerting rules
// in deploy/prometheus and the dashboard in deploy/grafana work unchanged
// on either path.
//
// Several controllers (or budgets, or throttle sets) on one Meter are told
// apart with WithAttributes, the counterpart of leveeprom.WithConstLabels.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), leveeotel is an adapter in a module of
// its own (github.com/levee-dev/levee/leveeotel), so that only services that
// use OpenTelemetry carry go.opentelemetry.io/otel: it reads the same
// snapshots and counters as leveeprom (admit, overload, retry, throttle, the
// configuration's and leveehttp's admin counters) through internal/instrument,
// imports OpenTelemetry's metric API and attributes only, never the SDK, and
// never imports the tools or the command; no package of levee imports it.
package leveeotel
