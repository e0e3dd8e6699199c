// Package rulecheck validates levee's example alerting rules
// (deploy/prometheus/levee-alerts.yml) with Prometheus's own rule-file and
// PromQL parsers, and checks that every metric they select is one that
// leveeprom exports.
//
// It is a separate module so that the Prometheus server's large dependency
// tree stays out of levee's go.mod. Run it with
//
//	cd deploy/prometheus/rulecheck && go test ./...
//
// leveeprom's own TestAlertRules makes a lighter structural check of the
// same file from the main module.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands) rulecheck is a check, not a library: a module of its own under
// deploy/, outside the workspace, that imports Prometheus's rule parser and
// reads leveeprom's metric names; nothing imports it.
package rulecheck
