package report_test

import (
	"fmt"

	"github.com/levee-dev/levee/tools/report"
)

// Counts per one-second bucket become the report's rates, and the
// figures are computed from them: a 3-second trigger cuts goodput, which
// comes back 2 seconds after the trigger ends.
func Example() {
	var buckets []report.Tally
	for _, good := range []int64{100, 100, 100, 100, 30, 20, 20, 50, 80, 100, 100, 100, 100} {
		buckets = append(buckets, report.Tally{Offered: 100, Attempted: 100, Goodput: good, Failed: 100 - good})
	}
	s := report.SeriesOf(buckets, 1)
	var spike report.Tally
	for _, b := range buckets[4:7] {
		spike.Add(b)
	}
	p := report.Phase{Name: "spike", StartS: 4, EndS: 7, Rates: spike.Rates(3)}
	fmt.Printf("spike: offered %.0f/s, goodput %.0f/s, failed %.0f/s\n", p.OfferedRPS, p.GoodputRPS, p.FailedRPS)
	fmt.Printf("outage_s %.0f, recovery_s %.0f\n", report.Outage(s), *report.Recovery(s, 4, 7))
	// Output:
	// spike: offered 100/s, goodput 23/s, failed 77/s
	// outage_s 0, recovery_s 2
}
