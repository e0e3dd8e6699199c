package limits

import (
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

func TestParseVmRSS(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want uint64
		ok   bool
	}{
		{"Name:\tx\nVmRSS:\t  1024 kB\nThreads:\t4\n", 1 << 20, true},
		{"VmRSS: 0 kB", 0, true},
		{"Name: x\n", 0, false},
		{"VmRSS: 12 MB\n", 0, false},
		{"VmRSS: x kB\n", 0, false},
	} {
		got, err := parseVmRSS([]byte(tt.in))
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseVmRSS(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// series builds a load result of 100 ms buckets from per-second offered
// and served counts (spread evenly over the second's buckets).
func series(offered, served []int64) *load.Result {
	r := &load.Result{Resolution: 100 * time.Millisecond}
	for i := range offered {
		for range 10 {
			r.Series = append(r.Series, load.Bucket{Tally: report.Tally{Offered: offered[i] / 10, Goodput: served[i] / 10}})
		}
	}
	return r
}

func TestRecovery(t *testing.T) {
	off := []int64{100, 100, 100, 100, 100, 100}
	for _, tt := range []struct {
		name   string
		served []int64
		want   float64
	}{
		{"served throughout", []int64{100, 100, 100, 100, 100, 100}, 0},
		{"back after a second", []int64{100, 100, 0, 100, 100, 100}, 1},
		{"a relapse counts", []int64{100, 100, 100, 0, 100, 100}, 2},
		{"95% is served (the window slides by 100 ms)", []int64{100, 100, 50, 90, 100, 100}, 1.5},
		{"never", []int64{100, 100, 0, 0, 0, 0}, -1},
	} {
		got := recovery(series(off, tt.served), 2*time.Second, 6*time.Second)
		if got != tt.want {
			t.Errorf("%s: recovery %v, want %v", tt.name, got, tt.want)
		}
	}
	if got := goodputRate(series(off, []int64{10, 20, 30, 40, 50, 60}), time.Second, 3*time.Second); got != 25 {
		t.Errorf("goodputRate over seconds 1–2: %v, want 25", got)
	}
}

func TestMemoryFit(t *testing.T) {
	if got := (MemoryConfig{}).Fit(); got != 512 {
		t.Errorf("what fits in 256 MiB at 1 MiB for 500 ms: %v a second, want 512", got)
	}
}
