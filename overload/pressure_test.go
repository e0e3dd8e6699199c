package overload

import (
	"errors"
	"fmt"
	"math"
	"syscall"
	"testing"
	"time"

	"github.com/levee-dev/levee/pressure"
)

func TestPressureResources(t *testing.T) {
	now := time.Unix(1000, 0)
	var n, limit int64 = 0, 256
	var err error
	files := pressure.NewOpenFiles(pressure.WithCountSource(func() (int64, int64, error) { return n, limit, err }))
	gor := pressure.NewGoroutines(1000, pressure.WithCountSource(func() (int64, int64, error) { return 930, 1000, nil }))
	mem := pressure.NewMemory(pressure.WithMemoryCgroupFS(nil), pressure.WithMemoryStats(func() pressure.MemoryStats {
		return pressure.MemoryStats{Live: 900, NonHeap: 20, Goal: 990, GoLimit: 1000}
	}))
	set := &pressure.Set{Memory: mem, Goroutines: gor, OpenFiles: files}
	rs := Resources(set)
	if len(rs) != 3 || rs[0].Name != "memory" || rs[1].Name != "goroutines" || rs[2].Name != "open_files" {
		t.Fatalf("Resources: %v", rs)
	}
	sample := func() { set.SampleAt(now); now = now.Add(time.Second) }
	tests := []struct {
		name         string
		n            int64
		err          error
		res          int
		value, used  float64
		limit        float64
		cycleNotZero bool
		wantNaN      bool
	}{
		{"memory against GOMEMLIMIT", 0, nil, 0, 0.92, 920, 1000, true, false},
		{"goroutines against the ceiling", 0, nil, 1, 0.93, 930, 1000, false, false},
		{"descriptors", 128, nil, 2, 0.5, 128, 256, false, false},
		{"out of descriptors: the limit reached", 0, fmt.Errorf("open /proc/self/fd: %w", syscall.EMFILE), 2, 1, 0, 256, false, false},
		{"another error: no reading", 0, errors.New("boom"), 2, 0, 0, 0, false, true},
	}
	for _, tt := range tests {
		n, err = tt.n, tt.err
		sample()
		r := rs[tt.res].Read()
		if tt.wantNaN {
			if !math.IsNaN(r.Value) {
				t.Errorf("%s: value %v, want NaN", tt.name, r.Value)
			}
			continue
		}
		if math.Abs(r.Value-tt.value) > 1e-9 || r.Used != tt.used || r.Limit != tt.limit || (r.Cycle != 0) != tt.cycleNotZero {
			t.Errorf("%s: reading %+v, want value %v, used %v, limit %v, cycle set %v", tt.name, r, tt.value, tt.used, tt.limit, tt.cycleNotZero)
		}
	}
}
