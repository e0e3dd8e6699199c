package loopback

import (
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loadgen"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in          []float64
		med, lo, hi float64
	}{
		{nil, 0, 0, 0},
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 2, 3}, 2.5, 1, 4},
	}
	for _, tt := range tests {
		m, lo, hi := Median(tt.in)
		if m != tt.med || lo != tt.lo || hi != tt.hi {
			t.Errorf("Median(%v) = %v, %v, %v, want %v, %v, %v", tt.in, m, lo, hi, tt.med, tt.lo, tt.hi)
		}
	}
}

// series builds a 100ms-bucket series from per-second rates.
func series(perSec ...int64) []int64 {
	var s []int64
	for _, r := range perSec {
		for i := 0; i < 10; i++ {
			s = append(s, r/10)
		}
	}
	return s
}

func TestFirstSustained(t *testing.T) {
	res := 100 * time.Millisecond
	tests := []struct {
		name        string
		s           []int64
		from, until time.Duration
		want        time.Duration
	}{
		{"at once", series(100, 100, 100, 100), 0, 4 * time.Second, 0},
		{"after 2s", series(100, 0, 0, 100, 100, 100, 100), time.Second, 7 * time.Second, 2 * time.Second},
		{"never", series(100, 0, 0, 100, 100), 0, 5 * time.Second, -1},
		{"too short to hold", series(100, 100), 0, 2 * time.Second, -1},
	}
	for _, tt := range tests {
		got := firstSustained(tt.s, res, tt.from, tt.until, 3*time.Second, 95)
		if got != tt.want {
			t.Errorf("%s: firstSustained = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func report(phases []loadgen.PhaseStats, goodput []int64) *loadgen.Report {
	r := &loadgen.Report{Resolution: 100 * time.Millisecond, Phases: phases}
	for _, g := range goodput {
		r.Series = append(r.Series, loadgen.Bucket{Goodput: g})
	}
	return r
}

func TestClientRecovery(t *testing.T) {
	phases := []loadgen.PhaseStats{
		{Name: "normal", Offset: 0, Duration: 2 * time.Second, Goodput: 200},
		{Name: "spike", Offset: 2 * time.Second, Duration: 2 * time.Second},
		{Name: "after", Offset: 4 * time.Second, Duration: 5 * time.Second},
	}
	tests := []struct {
		name    string
		goodput []int64
		want    float64
		ok      bool
	}{
		{"recovers 1s after", series(100, 100, 0, 0, 0, 100, 100, 100, 100), 1, true},
		{"at once", series(100, 100, 0, 0, 100, 100, 100, 100, 100), 0, true},
		{"never", series(100, 100, 0, 0, 0, 0, 0, 50, 50), 0, false},
	}
	for _, tt := range tests {
		got, ok := ClientRecovery(report(phases, tt.goodput), 0, 1)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: ClientRecovery = %v, %v, want %v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestServerRecoveryAlignsClocks(t *testing.T) {
	start := time.Unix(1000, 0)
	phases := []loadgen.PhaseStats{
		{Name: "spike", Offset: 0, Duration: 2 * time.Second},
		{Name: "after", Offset: 2 * time.Second, Duration: 4 * time.Second, Offered: 400},
	}
	// The backend started 1s before the generator: its series has one
	// more second in front.
	ok := series(0, 0, 0, 0, 100, 100, 100)
	res := &Result{
		Load: &loadgen.Report{Start: start, Resolution: 100 * time.Millisecond, Phases: phases},
		Server: backend.Report{Series: backend.Series{
			Start: start.Add(-time.Second), Resolution: 100 * time.Millisecond,
			OK: ok, OKLate: make([]int64, len(ok)),
		}},
	}
	got, okk := ServerRecovery(res, 0, 2*time.Second)
	if !okk || got != 1 {
		t.Errorf("ServerRecovery = %v, %v, want 1, true", got, okk)
	}
}

func TestLateShareAndPeak(t *testing.T) {
	s := backend.Series{
		Resolution: 100 * time.Millisecond,
		Runs:       series(100, 100),
		Late:       series(0, 50),
		OK:         series(100, 100),
		OKLate:     series(0, 50),
	}
	if got := LateShare(s); got != 0.25 {
		t.Errorf("LateShare = %v, want 0.25", got)
	}
	if got := PeakServed(s); got != 100 {
		t.Errorf("PeakServed = %v, want 100", got)
	}
	if got := LateShare(backend.Series{}); got != 0 {
		t.Errorf("LateShare(empty) = %v, want 0", got)
	}
}

func TestPhases(t *testing.T) {
	rep := &loadgen.Report{Phases: []loadgen.PhaseStats{{
		Name: "spike", Duration: 2 * time.Second, Offered: 200, Attempted: 500, Throttled: 20,
		Goodput: 100, Rejected: 40, Failed: 30, GenErrors: 10, P50: 1500 * time.Microsecond, P99: 20 * time.Millisecond,
	}}}
	got := Phases(rep)[0]
	want := PhaseReport{Name: "spike", OfferedRPS: 100, AttemptedRPS: 250, ThrottledRPS: 10, GoodputRPS: 50,
		RejectedRPS: 20, FailedRPS: 20, P50ms: 1.5, P99ms: 20}
	if got != want {
		t.Errorf("Phases = %+v, want %+v", got, want)
	}
}

func TestServerHealthy(t *testing.T) {
	start := time.Unix(1000, 0)
	phases := []loadgen.PhaseStats{
		{Name: "spike", Offset: 0, Duration: 2 * time.Second},
		{Name: "after", Offset: 2 * time.Second, Duration: 4 * time.Second, Offered: 400},
	}
	// Few requests reach the server after the spike (clients throttle),
	// but from second 3 on it answers all of them in time.
	ok := series(100, 100, 30, 30, 30, 30)
	late := series(100, 100, 20, 0, 0, 0)
	res := &Result{
		Load: &loadgen.Report{Start: start, Resolution: 100 * time.Millisecond, Phases: phases},
		Server: backend.Report{Series: backend.Series{
			Start: start, Resolution: 100 * time.Millisecond,
			OK: ok, OKLate: late, Rejected: make([]int64, len(ok)), Other: make([]int64, len(ok)),
		}},
	}
	if got, healthy := ServerHealthy(res, 0, 2*time.Second); !healthy || got != 1 {
		t.Errorf("ServerHealthy = %v, %v, want 1, true", got, healthy)
	}
	if _, served := ServerRecovery(res, 0, 2*time.Second); served {
		t.Errorf("ServerRecovery: recovered, want never (30/s answered of 100/s offered)")
	}
}
