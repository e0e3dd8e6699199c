package rulecheck_test

import (
	"fmt"

	"github.com/levee-dev/levee/deploy/prometheus/rulecheck"
)

func ExampleMetricNames() {
	names, err := rulecheck.MetricNames(`levee_offered_requests_per_second > levee_capacity_requests_per_second and levee_capacity_requests_per_second > 0`)
	fmt.Println(names, err)
	// Output:
	// [levee_capacity_requests_per_second levee_offered_requests_per_second] <nil>
}

func ExampleRunRuleTests() {
	errs := rulecheck.RunRuleTests("../levee-alerts.test.yml")
	fmt.Println(len(errs), "failed expectations")
	// Output:
	// 0 failed expectations
}
