package chart

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/levee-dev/levee/tools/report"
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

// ReportPage draws what a run has: the requests always, the p99 series and
// the latency distribution when measured, each instance series present.
func TestReportPage(t *testing.T) {
	seed := uint64(1)
	run := report.Run{Name: "r", Protection: "levee",
		Phases: []report.Phase{{Name: "a", Latency: report.Latency{Quantiles: []report.Quantile{{Q: 0.5, S: 0.001}, {Q: 0.99, S: 0.01}, {Q: 1, S: 0.02}}}}},
		Series: report.Series{BucketS: 1, OfferedRPS: []float64{1, 2}, AttemptedRPS: []float64{1, 2}, ThrottledRPS: []float64{0, 0},
			GoodputRPS: []float64{1, 2}, RejectedRPS: []float64{0, 0}, FailedRPS: []float64{0, 0}, P99S: []float64{0.01, 0.02},
			Instances: []report.InstanceSeries{{Name: "i", ReceivedRPS: []float64{1, 2}, ServedRPS: []float64{1, 2}, RejectedRPS: []float64{0, 0}, ShedLevel: []float64{0, 1}}}},
	}
	rep := &report.Report{Tool: "load attack", Seed: &seed, Runs: []report.Run{run}}
	var b bytes.Buffer
	if err := WriteReport(&b, rep, ""); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	// requests, p99, distribution, received, served, shed level
	if n := strings.Count(s, "<svg"); n != 6 {
		t.Errorf("%d charts, want 6", n)
	}
	for _, want := range []string{"levee load attack (seed 1)", "latency of successes by percentile", "shed level", "<pre>load attack"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
