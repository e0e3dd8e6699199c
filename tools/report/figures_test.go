package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// goodput builds a Series whose goodput is g and offered o (per bucket).
func series(bucketS float64, o, g []float64) Series {
	return Series{BucketS: bucketS, OfferedRPS: o, GoodputRPS: g}
}

func ptr(x float64) *float64 { return &x }

func TestRecovery(t *testing.T) {
	// One-second buckets: 10 s at 100/s, a 5 s trigger (t = 10..15) at
	// 20/s, then 94, 96, 96, 95, 100/s … and 95% of 100 is 95.
	flat := func(n int, v float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	cat := func(parts ...[]float64) []float64 {
		var out []float64
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	tests := []struct {
		name               string
		s                  Series
		trigStart, trigEnd float64
		want               *float64
	}{
		{"back after 1 s", series(1, nil, cat(flat(10, 100), flat(5, 20), []float64{94, 96, 96, 95, 100})), 10, 15, ptr(1)},
		{"back at once", series(1, nil, cat(flat(10, 100), flat(5, 20), flat(3, 95))), 10, 15, ptr(0)},
		{"never: 2 s are not 3", series(1, nil, cat(flat(10, 100), flat(5, 20), []float64{96, 96, 10, 96, 96})), 10, 15, nil},
		{"never: series ends", series(1, nil, cat(flat(10, 100), flat(5, 20), flat(2, 100))), 10, 15, nil},
		{"no bucket before the trigger", series(1, nil, cat(flat(5, 20), flat(5, 100))), 0, 5, nil},
		{"pre-trigger mean over at most 10 s", series(1, nil, cat(flat(5, 1000), flat(10, 100), flat(2, 0), flat(3, 95))), 15, 17, ptr(0)},
		// 100 ms buckets: the mean of each whole second counts, not each
		// bucket: a second of 0, 190, 0, 190, … is 95/s.
		{"sub-second buckets", series(0.1, nil, cat(flat(20, 100), flat(10, 0), flat(5, 0), alternating(30, 0, 190))), 2, 3, ptr(0.5)},
		{"no bucket width", Series{}, 1, 2, nil},
	}
	for _, tt := range tests {
		got := Recovery(tt.s, tt.trigStart, tt.trigEnd)
		switch {
		case got == nil && tt.want == nil:
		case got == nil || tt.want == nil || *got != *tt.want:
			t.Errorf("%s: Recovery = %v, want %v", tt.name, show(got), show(tt.want))
		}
	}
}

func alternating(n int, a, b float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		if i%2 == 0 {
			out[i] = a
		} else {
			out[i] = b
		}
	}
	return out
}

func show(p *float64) any {
	if p == nil {
		return "never"
	}
	return *p
}

func TestSustained(t *testing.T) {
	tests := []struct {
		name                    string
		rates                   []float64
		bucketS, from, hold, at float64
		want                    float64
		ok                      bool
	}{
		{"2 s buckets: hold 3 s is 2 buckets", []float64{0, 10, 10, 0}, 2, 0, 3, 10, 2, true},
		{"from mid-bucket is not negative", []float64{10, 10, 10}, 1, 0.5, 2, 10, 0, true},
		{"starts after from", []float64{10, 0, 10, 10}, 1, 0, 2, 10, 2, true},
		{"never", []float64{10, 0, 10, 0}, 1, 0, 2, 10, 0, false},
	}
	for _, tt := range tests {
		got, ok := Sustained(tt.rates, tt.bucketS, tt.from, tt.hold, tt.at)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Sustained = %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestOutage(t *testing.T) {
	s := Series{
		BucketS:    0.5,
		OfferedRPS: []float64{100, 100, 100, 0, 100, 100},
		GoodputRPS: []float64{100, 9.9, 10, 0, 0, 50},
	}
	// Buckets 1 and 4 are below 10% of offered; bucket 3 offered nothing.
	if got := Outage(s); got != 1 {
		t.Errorf("Outage = %v, want 1 (two half-second buckets)", got)
	}
}

func TestBestSecond(t *testing.T) {
	tests := []struct {
		name    string
		rates   []float64
		bucketS float64
		want    float64
	}{
		{"sliding window of 100 ms buckets", []float64{0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 0}, 0.1, 55},
		{"shorter than a second: the mean", []float64{10, 20}, 0.1, 15},
		{"second buckets", []float64{3, 9, 4}, 1, 9},
		{"empty", nil, 1, 0},
	}
	for _, tt := range tests {
		if got := BestSecond(tt.rates, tt.bucketS); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: BestSecond = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		xs          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 2}, 2.5, 1, 4},
	}
	for _, tt := range tests {
		med, lo, hi := Median(tt.xs)
		if med != tt.med || lo != tt.lo || hi != tt.hi {
			t.Errorf("Median(%v) = %v, %v, %v; want %v, %v, %v", tt.xs, med, lo, hi, tt.med, tt.lo, tt.hi)
		}
	}
}

func TestTallyRates(t *testing.T) {
	var tl Tally
	tl.Add(Tally{Offered: 30, Attempted: 45, Throttled: 3, Goodput: 20, Rejected: 4, Failed: 3})
	tl.Add(Tally{Offered: 1, Goodput: 1})
	got := tl.Rates(3)
	want := Rates{OfferedRPS: 10.333, AttemptedRPS: 15, ThrottledRPS: 1, GoodputRPS: 7, RejectedRPS: 1.333, FailedRPS: 1}
	if got != want {
		t.Errorf("Rates = %+v, want %+v", got, want)
	}
	if got := tl.Rates(0); got != (Rates{}) {
		t.Errorf("Rates(0) = %+v, want zeros", got)
	}
	s := SeriesOf([]Tally{{Offered: 5, Goodput: 4}, {Offered: 2, Failed: 2}}, 0.5)
	if s.OfferedRPS[0] != 10 || s.GoodputRPS[0] != 8 || s.FailedRPS[1] != 4 || s.BucketS != 0.5 {
		t.Errorf("SeriesOf = %+v", s)
	}
}

func TestShareAndRound(t *testing.T) {
	if got := Share(1, 3); got != 0.333 {
		t.Errorf("Share(1, 3) = %v, want 0.333", got)
	}
	if got := Share(1, 0); got != 0 {
		t.Errorf("Share(1, 0) = %v, want 0", got)
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got := Round(x); got != 0 {
			t.Errorf("Round(%v) = %v, want 0", x, got)
		}
	}
}

// The schema's JSON names are the vocabulary of DESIGN.md.
func TestSchemaNames(t *testing.T) {
	seed := uint64(7)
	r := Report{Tool: "sim", Seed: &seed, Runs: []Run{{
		Name: "levee", Protection: "levee",
		Phases: []Phase{{Name: "spike", Rates: Rates{OfferedRPS: 1, GoodputRPS: 1},
			ByCriticality: []Class{{Name: "SHEDDABLE", Rates: Rates{OfferedRPS: 1}}}, Latency: Latency{P99: 0.1}}},
	}}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"tool":"sim"`, `"seed":7`, `"offered_rps":1`, `"attempted_rps":0`, `"throttled_rps":0`,
		`"goodput_rps":1`, `"rejected_rps":0`, `"failed_rps":0`, `"recovery_s":null`, `"outage_s":0`,
		`"wasted_work_share":0`, `"latency_s":{"p99":0.1}`, `"by_criticality":[{"name":"SHEDDABLE"`, `"capacity_rps":0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("JSON lacks %s:\n%s", want, b)
		}
	}
}

func TestFitLine(t *testing.T) {
	a, b, ok := FitLine([]float64{100, 200, 300}, []float64{0.12, 0.22, 0.32})
	if !ok || math.Abs(a-0.02) > 1e-12 || math.Abs(b-0.001) > 1e-12 {
		t.Errorf("FitLine = %v, %v, %v; want 0.02, 0.001", a, b, ok)
	}
	if a, b, ok := FitLine([]float64{100}, []float64{0.5}); !ok || a != 0 || b != 0.005 {
		t.Errorf("one point: %v, %v, %v; want through the origin", a, b, ok)
	}
	if _, _, ok := FitLine([]float64{5, 5}, []float64{1, 2}); ok {
		t.Error("no spread in x: ok")
	}
}
