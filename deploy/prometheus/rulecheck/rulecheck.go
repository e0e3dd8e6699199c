package rulecheck

import (
	"slices"

	"github.com/prometheus/prometheus/promql/parser"
)

// MetricNames returns the sorted, distinct metric names that the PromQL
// expression expr selects, or the parser's error.
func MetricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" && !slices.Contains(names, vs.Name) {
			names = append(names, vs.Name)
		}
		return nil
	})
	slices.Sort(names)
	return names, nil
}
