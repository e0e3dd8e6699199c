package instrument_test

import (
	"fmt"

	"github.com/levee-dev/levee/internal/instrument"
	"github.com/levee-dev/levee/retry"
)

// An exporter turns each reading into its own kind of sample.
func ExampleReadBudget() {
	instrument.ReadBudget(retry.BudgetStats{Requests: 120, Retries: 6, Refused: 2},
		func(m *instrument.Metric, v float64, _ ...string) {
			fmt.Printf("%s %v (unit %q)\n", m.Name, v, m.Unit)
		})
	// Output:
	// levee_retry_budget_requests_total 120 (unit "{request}")
	// levee_retries_total 6 (unit "{request}")
	// levee_retries_denied_total 2 (unit "{request}")
}
