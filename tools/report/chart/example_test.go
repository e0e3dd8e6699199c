package chart_test

import (
	"fmt"
	"strings"

	"github.com/levee-dev/levee/tools/report/chart"
)

func Example() {
	offered := []float64{100, 100, 300, 300, 100}
	goodput := []float64{100, 100, 120, 110, 100}
	p := &chart.Page{
		Title: "overload",
		Sections: []chart.Section{{
			Title: "requests per second",
			Charts: []chart.Chart{{
				Title: "offered vs goodput", XLabel: "time (s)", YLabel: "requests/s",
				Series: []chart.Series{
					chart.Uniform("offered", 0, 1, offered),
					chart.Uniform("goodput", 0, 1, goodput),
				},
			}},
		}},
	}
	var b strings.Builder
	if err := p.WriteHTML(&b); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Count(b.String(), "<svg"), "chart")
	// Output: 1 chart
}
