package leveeprom

import (
	"bytes"
	"context"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares the text exposition of c with testdata/name, rewriting the
// file first when -update is given.
func golden(t *testing.T, c prometheus.Collector, name string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, exposition(t, c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if err := testutil.CollectAndCompare(c, bytes.NewReader(want)); err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// exposition returns c's metrics in the Prometheus text format.
func exposition(t *testing.T, c prometheus.Collector) []byte {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("Register: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatalf("Encode: %v", err)
		}
	}
	return buf.Bytes()
}

// overloadSnapshot is a controller in the middle of an overload: CPU above
// target, SHEDDABLE fully shed and 30% of SHEDDABLE_PLUS.
func overloadSnapshot() admit.Snapshot {
	s := admit.Snapshot{
		Time:          time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Overloaded:    true,
		Load:          1.25,
		ShedLevel:     1.3,
		AdmitFraction: 0.55,
		DegradeLevel:  2,
		Signals: []admit.SignalState{
			{Name: "cpu", Value: 1.0, Target: 0.8},
			{Name: "sched_latency", Value: 0.004, Target: 0.01},
			{Name: "queue_delay", Value: math.NaN(), Target: 0.005},
		},
		DownstreamOverloaded: 7,
		ShedSeconds:          42.5,
		DegradedSeconds:      60,
		RetryShare:           0.25,
		NoRetry:              true,
		RetryAfter:           1500 * time.Millisecond,
		CapacityRPS:          800,
		FairShareRPS:         200,
		ActiveTenants:        4,
		OfferedRPS:           1450,
		TenantShedRPS:        120,
		CallerGone:           3,
		Routes:               2,
		Running:              4,
		Waiting:              9,
		RunBound:             4,
	}
	s.Admitted[levee.CriticalPlus] = 1000
	s.Admitted[levee.Critical] = 5000
	s.Admitted[levee.SheddablePlus] = 700
	s.Admitted[levee.Sheddable] = 100
	s.Rejected[levee.Sheddable][levee.Overloaded] = 900
	s.Rejected[levee.SheddablePlus][levee.Overloaded] = 300
	s.Rejected[levee.Critical][levee.Quota] = 20
	s.Rejected[levee.Critical][levee.Deadline] = 5
	return s
}

// dryRunSnapshot is a controller in dry-run at 3× its capacity: nothing
// rejected, the would-be rejections counted beside.
func dryRunSnapshot() admit.Snapshot {
	s := admit.Snapshot{AdmitFraction: 1, DryRun: true, WouldShedRPS: 2000, OfferedRPS: 3000, CapacityRPS: 1000, Load: 1.9}
	s.Admitted[levee.CriticalPlus] = 750
	s.Admitted[levee.Critical] = 750
	s.Admitted[levee.SheddablePlus] = 750
	s.Admitted[levee.Sheddable] = 750
	s.WouldReject[levee.Sheddable][levee.Overloaded] = 750
	s.WouldReject[levee.SheddablePlus][levee.Overloaded] = 750
	s.WouldReject[levee.Critical][levee.Overloaded] = 500
	s.WouldReject[levee.Critical][levee.Quota] = 7
	return s
}

func TestAdmitCollectorGolden(t *testing.T) {
	tests := []struct {
		name string
		snap admit.Snapshot
		opts []Option
	}{
		{"admit_idle.prom", admit.Snapshot{AdmitFraction: 1}, nil},
		{"admit_overload.prom", overloadSnapshot(), nil},
		{"admit_constlabels.prom", admit.Snapshot{Signals: []admit.SignalState{{Name: "cpu", Value: 0.4, Target: 0.8}}},
			[]Option{WithConstLabels(prometheus.Labels{"controller": "api"})}},
		{"admit_dryrun.prom", dryRunSnapshot(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newAdmitCollector(func() admit.Snapshot { return tt.snap }, tt.opts)
			golden(t, c, tt.name)
		})
	}
}

func TestAdmitCollectorLint(t *testing.T) {
	c := newAdmitCollector(overloadSnapshot, nil)
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint %s: %s", p.Metric, p.Text)
	}
}

func TestAdmitCollectorRealController(t *testing.T) {
	sig := &fixedSignal{name: "cpu", value: 0.9, target: 0.8}
	ctl := admit.New(admit.WithSignals(sig))
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ctl.Step(now)
	for i := range 10 {
		tk, err := ctl.AdmitAt(context.Background(), now.Add(time.Duration(i)*time.Millisecond))
		if err == nil {
			tk.DoneAt(now, nil)
		}
	}
	ctl.Step(now.Add(admit.DefaultPeriod))

	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewAdmitCollector(ctl)); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP levee_signal_target Target of a resource signal, in the signal's own unit; above it the controller sheds.
# TYPE levee_signal_target gauge
levee_signal_target{signal="cpu"} 0.8
`), "levee_signal_target"); err != nil {
		t.Error(err)
	}
	n, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// 4 admissions + 12 rejections + 20 overload rejections by stage + 12
	// would-be rejections + 25 single gauges/counters + 3 per signal.
	if want := 4 + 12 + 20 + 12 + 25 + 3; n != want {
		t.Errorf("GatherAndCount = %d, want %d", n, want)
	}
}

func TestWithConstLabelsClash(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := newAdmitCollector(overloadSnapshot, []Option{WithConstLabels(prometheus.Labels{"signal": "x"})})
	if err := reg.Register(c); err == nil {
		t.Error("Register with a clashing const label: got nil error, want one")
	}
}

type fixedSignal struct {
	name          string
	value, target float64
}

func (s *fixedSignal) Name() string    { return s.name }
func (s *fixedSignal) Value() float64  { return s.value }
func (s *fixedSignal) Target() float64 { return s.target }
