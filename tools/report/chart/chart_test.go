package chart

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestSVG(t *testing.T) {
	c := Chart{
		Title: "requests", XLabel: "time (s)", YLabel: "req/s",
		Series: []Series{
			Uniform("offered", 0.5, 1, []float64{1, 2, 3, math.NaN(), 5}),
			{Name: "goodput", X: []float64{0, 1, 2}, Y: []float64{1, 1, 1}},
		},
	}
	a, err := SVG(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(a, []byte("<svg")) {
		t.Errorf("SVG starts with %q, want <svg", a[:min(len(a), 20)])
	}
	for _, want := range []string{"requests", "offered", "goodput", "time (s)"} {
		if !bytes.Contains(a, []byte(want)) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	b, _ := SVG(c)
	if !bytes.Equal(a, b) {
		t.Error("the same chart rendered twice differs")
	}
}

func TestSVGErrors(t *testing.T) {
	tests := []struct {
		name string
		c    Chart
		want string
	}{
		{"no series", Chart{}, "without series"},
		{"length mismatch", Chart{Series: []Series{{Name: "x", X: []float64{1}, Y: []float64{1, 2}}}}, "1 x values, 2 y values"},
	}
	for _, tt := range tests {
		_, err := SVG(tt.c)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestWriteHTML(t *testing.T) {
	p := &Page{
		Title: "levee <report>",
		Intro: "a & b",
		Sections: []Section{{
			Title: "run",
			Text:  "text",
			Pre:   "col1  col2",
			Table: &Table{Header: []string{"t", "why"}, Rows: [][]string{{"1.0", "<script>"}}},
			Charts: []Chart{{
				Title:  "c",
				Series: []Series{Uniform("s", 0, 1, []float64{1, 2})},
			}},
		}},
	}
	var a, b bytes.Buffer
	if err := p.WriteHTML(&a); err != nil {
		t.Fatal(err)
	}
	if err := p.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("WriteHTML is not deterministic")
	}
	s := a.String()
	for _, want := range []string{"<!DOCTYPE html>", "levee &lt;report&gt;", "a &amp; b", "<svg", "&lt;script&gt;", "<pre>col1  col2</pre>"} {
		if !strings.Contains(s, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(s, "http://www.w3.org", ""), bad) {
			t.Errorf("HTML contains %q: not self-contained or not escaped", bad)
		}
	}
}
