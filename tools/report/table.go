package report

import (
	"fmt"
	"strings"
)

// Figure is one row of a MedianTable: its label and the value it takes
// from one run's line.
type Figure[L any] struct {
	Label string
	Of    func(L) float64
}

// MedianTable renders a Markdown table of repeated runs: a row for each
// figure, a column for each name of columns (the lines whose column
// returns it), each cell the median of the lines' values and their range,
// "median [min–max]" (one value alone, or all equal, without the range;
// "–" without any). Labs that alternate variants state their figures so.
func MedianTable[L any](title string, columns []string, lines []L, column func(L) string, figures []Figure[L]) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| %s |", title)
	for _, c := range columns {
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString("\n|---|")
	for range columns {
		b.WriteString("---:|")
	}
	b.WriteByte('\n')
	for _, f := range figures {
		fmt.Fprintf(&b, "| %s |", f.Label)
		for _, c := range columns {
			var xs []float64
			for _, l := range lines {
				if column(l) == c {
					xs = append(xs, f.Of(l))
				}
			}
			b.WriteString(" " + medianCell(xs) + " |")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// medianCell formats the median of xs and its range.
func medianCell(xs []float64) string {
	if len(xs) == 0 {
		return "–"
	}
	med, lo, hi := Median(xs)
	if lo == hi {
		return fmt.Sprintf("%.3g", med)
	}
	return fmt.Sprintf("%.3g [%.3g–%.3g]", med, lo, hi)
}
