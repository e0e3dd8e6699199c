package rulecheck

import (
	"slices"

	"github.com/prometheus/prometheus/promql/parser"
)

// MetricNames returns the sorted, distinct metric names that the PromQL
// expression expr selects, or the parser's error.
func MetricNames(expr string) ([]string, error) {
	sels, err := selectors(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, vs := range sels {
		if vs.Name != "" && !slices.Contains(names, vs.Name) {
			names = append(names, vs.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// selectors returns every vector selector in expr (those inside range
// selectors and subqueries included), or the parser's error.
func selectors(expr string) ([]*parser.VectorSelector, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var out []*parser.VectorSelector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs)
		}
		return nil
	})
	return out, nil
}
