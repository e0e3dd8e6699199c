package load

import (
	"math"
	"reflect"
	"testing"

	"github.com/levee-dev/levee"
)

// Any stretch of arrivals holds each class in proportion to its weight,
// and the criticality and the tenant of an arrival are independent.
func TestMixShares(t *testing.T) {
	m, err := Mix{
		Criticalities: []Share{{"CRITICAL_PLUS", 1}, {"CRITICAL", 2}, {"SHEDDABLE", 7}},
		Tenants:       []Share{{"a", 1}, {"b", 1}, {"c", 2}},
	}.compile()
	if err != nil {
		t.Fatal(err)
	}
	const n = 10000
	var crit [3]int
	var joint [3][3]int
	for _, from := range []int64{0, 123457} { // two different stretches
		crit = [3]int{}
		joint = [3][3]int{}
		for k := from; k < from+n; k++ {
			c, tn := m.assign(k)
			crit[c]++
			joint[c][tn]++
		}
		for i, w := range []float64{0.1, 0.2, 0.7} {
			if got := float64(crit[i]) / n; math.Abs(got-w) > 0.002 {
				t.Errorf("from %d: criticality %d share %.4f, want %.1f ± 0.002", from, i, got, w)
			}
			for j, v := range []float64{0.25, 0.25, 0.5} {
				if got := float64(joint[i][j]) / n; math.Abs(got-w*v) > 0.01 {
					t.Errorf("from %d: criticality %d × tenant %d share %.4f, want %.3f ± 0.01 (independent)", from, i, j, got, w*v)
				}
			}
		}
	}
	if m.crits[2] != levee.Sheddable || m.tenants[2] != "c" {
		t.Errorf("classes %v %v", m.crits, m.tenants)
	}
	if got := m.byRank(); !reflect.DeepEqual(got, []int{2, 1, 0}) {
		t.Errorf("byRank = %v, want [2 1 0] (SHEDDABLE, CRITICAL, CRITICAL_PLUS)", got)
	}
}

func TestMixErrors(t *testing.T) {
	tests := []Mix{
		{Criticalities: []Share{{"URGENT", 1}}},
		{Criticalities: []Share{{"CRITICAL", -1}}},
		{Criticalities: []Share{{"CRITICAL", 0}}},
		{Tenants: []Share{{"a", 1}, {"a", 1}}},
		{Tenants: []Share{{"", 1}}},
		{Tenants: make([]Share, MaxTenants+1)},
	}
	for _, m := range tests {
		if _, err := m.compile(); err == nil {
			t.Errorf("compile(%+v): err = nil, want an error", m)
		}
	}
}

func TestParseShares(t *testing.T) {
	tests := []struct {
		in   string
		want []Share
		err  bool
	}{
		{"", nil, false},
		{"CRITICAL=3,SHEDDABLE=1", []Share{{"CRITICAL", 3}, {"SHEDDABLE", 1}}, false},
		{" a , b=2 ", []Share{{"a", 1}, {"b", 2}}, false},
		{"3", []Share{{"t1", 1}, {"t2", 1}, {"t3", 1}}, false},
		{"a=x", nil, true},
		{"a=-1", nil, true},
		{"=2", nil, true},
		{"0", nil, true},
		{"100000", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseShares(tt.in)
		if (err != nil) != tt.err || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseShares(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}
