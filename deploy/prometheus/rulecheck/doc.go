// Package rulecheck checks levee's deploy/ files with Prometheus's own
// code: the alerting rules (deploy/prometheus/levee-alerts.yml), their unit
// tests (levee-alerts.test.yml) and the Grafana dashboard
// (deploy/grafana/levee.json).
//
// Its tests load the rules with Prometheus's rule-file parser; run the unit
// tests with Prometheus's rule engine through RunRuleTests, which reads
// the format of `promtool test rules` and drives the pieces promtool uses
// (promqltest's lazy loader, the rules package's groups, the PromQL
// engine), so that the same file also runs with promtool; require every
// alert to fire in one test and stay silent in another; and parse every
// query of the rules and of the dashboard with Prometheus's PromQL parser,
// requiring each selector to name a metric that leveeprom's collectors
// expose when registered and gathered, with labels it has and values that
// match.
//
// It is a separate module so that the Prometheus server's large dependency
// tree stays out of levee's go.mod. Run it with
//
//	cd deploy/prometheus/rulecheck && GOWORK=off go test ./...
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands) rulecheck is a check, not a library: a module of its own under
// deploy/, outside the workspace, that imports Prometheus's rule parser and
// engine and reads leveeprom's metrics; nothing imports it.
package rulecheck
