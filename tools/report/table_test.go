package report

import "testing"

func TestMedianCell(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want string
	}{
		{nil, "–"},
		{[]float64{0.5}, "0.5"},
		{[]float64{0.5, 0.5}, "0.5"},
		{[]float64{3, 1, 2}, "2 [1–3]"},
		{[]float64{0.2, 0.4}, "0.3 [0.2–0.4]"},
		{[]float64{812, 790}, "801 [790–812]"},
		{[]float64{1e9, 1e9, 0.4}, "1e+09 [0.4–1e+09]"},
	} {
		if got := medianCell(tt.xs); got != tt.want {
			t.Errorf("medianCell(%v) = %q, want %q", tt.xs, got, tt.want)
		}
	}
}

func TestMedianTable(t *testing.T) {
	type line struct {
		v string
		x float64
	}
	lines := []line{{"a", 1}, {"b", 5}, {"a", 3}, {"b", 5}}
	got := MedianTable("lab", []string{"a", "b", "c"}, lines, func(l line) string { return l.v },
		[]Figure[line]{{"x", func(l line) float64 { return l.x }}, {"2x", func(l line) float64 { return 2 * l.x }}})
	want := "| lab | a | b | c |\n|---|---:|---:|---:|\n| x | 2 [1–3] | 5 | – |\n| 2x | 4 [2–6] | 10 | – |\n"
	if got != want {
		t.Errorf("MedianTable:\n%s\nwant:\n%s", got, want)
	}
}
