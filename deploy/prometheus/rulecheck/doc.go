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
package rulecheck
