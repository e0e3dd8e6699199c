package pressure

import (
	"errors"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"testing/fstest"
	"time"
)

const mib = 1 << 20

func TestMemory(t *testing.T) {
	noGoLimit := uint64(math.MaxInt64)
	tests := []struct {
		name    string
		fixture string // cgroup tree; "" = none
		stats   MemoryStats
		want    float64 // NaN: no reading
		limit   uint64
	}{
		{"GOMEMLIMIT alone", "", MemoryStats{Live: 150 * mib, NonHeap: 10 * mib, Goal: 300 * mib, GoLimit: 200 * mib}, 0.8, 200 * mib},
		{"no limit anywhere", "", MemoryStats{Live: 150 * mib, GoLimit: noGoLimit}, math.NaN(), 0},
		// This machine: v1 memory cgroup with the kernel's "unlimited".
		{"hybrid host, unlimited", "hybrid", MemoryStats{Live: 150 * mib, GoLimit: noGoLimit}, math.NaN(), 0},
		// Kubernetes: 1 GiB on the pod, memory.high 768 MiB on the
		// container, no GOMEMLIMIT: the heap grows to its goal before the
		// next GC, which must fit.
		{"cgroup v2, the GC goal against memory.high", "v2-quota", MemoryStats{Live: 300 * mib, NonHeap: 30 * mib, Goal: 600 * mib, GoLimit: noGoLimit}, 630.0 / 768, 768 * mib},
		{"cgroup v1 limit_in_bytes", "v1-quota", MemoryStats{Live: 100 * mib, NonHeap: 28 * mib, Goal: 200 * mib, GoLimit: noGoLimit}, 228.0 / 512, 512 * mib},
		// GOMEMLIMIT below the cgroup's: the runtime keeps the heap within
		// it, what no GC frees counts.
		{"GOMEMLIMIT under the cgroup limit", "v1-quota", MemoryStats{Live: 300 * mib, NonHeap: 20 * mib, Goal: 400 * mib, GoLimit: 400 * mib}, 0.8, 400 * mib},
		// GOMEMLIMIT above the cgroup's: the kernel's binds, with the peak.
		{"GOMEMLIMIT above the cgroup limit", "v2-namespace", MemoryStats{Live: 100 * mib, NonHeap: 8 * mib, Goal: 200 * mib, GoLimit: 1024 * mib}, 208.0 / 256, 256 * mib},
	}
	for _, tt := range tests {
		opts := []MemoryOption{WithMemoryStats(func() MemoryStats { return tt.stats }), WithMemoryCgroupFS(nil)}
		if tt.fixture != "" {
			opts = append(opts, WithMemoryCgroupFS(os.DirFS("../internal/cgroup/testdata/"+tt.fixture)))
		}
		m := NewMemory(opts...)
		m.SampleAt(t0)
		r := m.Reading()
		if got := m.Value(); math.IsNaN(tt.want) != math.IsNaN(got) || math.Abs(got-tt.want) > 1e-9 || r.Limit != tt.limit {
			t.Errorf("%s: Value %v (limit %d MiB); want %v (limit %d MiB) — %+v", tt.name, got, r.Limit/mib, tt.want, tt.limit/mib, r)
		}
	}
}

// TestMemoryBadCgroup: a limit file the parser refuses is not guessed at;
// GOMEMLIMIT still counts, and the error is reported.
func TestMemoryBadCgroup(t *testing.T) {
	m := NewMemory(WithMemoryCgroupFS(os.DirFS("../internal/cgroup/testdata/mem-v2-badmax")),
		WithMemoryStats(func() MemoryStats { return MemoryStats{Live: 90 * mib, GoLimit: 100 * mib} }))
	m.SampleAt(t0)
	if r := m.Reading(); m.Value() != 0.9 || r.Err == nil || r.CgroupLimit != 0 {
		t.Errorf("Value %v, reading %+v; want 0.9 from GOMEMLIMIT and the parse error", m.Value(), r)
	}
}

// TestMemoryLimitRefresh: the cgroup limit is read again every second, so
// a limit raised or lowered at run time is followed.
func TestMemoryLimitRefresh(t *testing.T) {
	fsys := fstest.MapFS{
		"proc/self/cgroup":                 {Data: []byte("0::/app\n")},
		"proc/self/mountinfo":              {Data: []byte("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")},
		"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpu memory\n")},
		"sys/fs/cgroup/app/memory.max":     {Data: []byte("1073741824\n")},
	}
	m := NewMemory(WithMemoryCgroupFS(fsys), WithMemoryStats(func() MemoryStats {
		return MemoryStats{Live: 256 * mib, Goal: 512 * mib, GoLimit: math.MaxInt64}
	}))
	m.SampleAt(t0)
	if m.Value() != 0.5 {
		t.Fatalf("Value %v; want 0.5 (goal 512 MiB of 1 GiB)", m.Value())
	}
	fsys["sys/fs/cgroup/app/memory.max"] = &fstest.MapFile{Data: []byte("536870912\n")}
	m.SampleAt(t0.Add(500 * time.Millisecond))
	if m.Value() != 0.5 {
		t.Errorf("Value %v half a second later; want 0.5 (the limit is re-read once a second)", m.Value())
	}
	m.SampleAt(t0.Add(time.Second))
	if m.Value() != 1 {
		t.Errorf("Value %v after the limit halved; want 1", m.Value())
	}
}

// TestMemoryRuntime reads this process's real figures under a GOMEMLIMIT
// set for the test: a held allocation shows in the value.
func TestMemoryRuntime(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(512 * mib))
	m := NewMemory(WithMemoryCgroupFS(nil))
	hold := make([]byte, 128*mib)
	for i := range hold {
		hold[i] = 1
	}
	runtime.GC()
	m.SampleAt(t0)
	r := m.Reading()
	if r.Limit != 512*mib || r.InUse < 128*mib || m.Value() < 0.25 || m.Value() > 0.6 {
		t.Errorf("with 128 MiB held under a 512 MiB GOMEMLIMIT: Value %v, reading %+v; want 0.25–0.6", m.Value(), r)
	}
	runtime.KeepAlive(hold)
}

func TestGCCPU(t *testing.T) {
	var gc, all float64
	g := NewGCCPU(WithGCSmoothing(0), WithGCSource(func() (float64, float64) { return gc, all }))
	g.SampleAt(t0)
	if !math.IsNaN(g.Value()) {
		t.Fatalf("Value %v after one sample; want NaN", g.Value())
	}
	steps := []struct {
		dGC, dAll float64
		want      float64
	}{
		{0.02, 0.2, 0.1}, // a tenth of the available CPU
		{0, 0.2, 0},      // no cycle
		{0.1, 0.2, 0.5},  // the limiter's ceiling
		{0.5, 0.2, 1},    // estimates above the total are capped
		{-1, 0.2, 1},     // a counter that went back restarts: no new value
		{0.06, 0.2, 0.3}, // and the next period counts from there
	}
	for i, s := range steps {
		gc += s.dGC
		all += s.dAll
		g.SampleAt(t0.Add(time.Duration(i+1) * 100 * time.Millisecond))
		if got := g.Value(); math.Abs(got-s.want) > 1e-9 {
			t.Errorf("step %d (+%v GC of +%v): Value %v; want %v", i, s.dGC, s.dAll, got, s.want)
		}
	}
}

func TestCount(t *testing.T) {
	var n, limit int64 = 450, 1000
	var err error
	c := NewOpenFiles(WithCountSource(func() (int64, int64, error) { return n, limit, err }))
	c.SampleAt(t0)
	if c.Value() != 0.45 || c.Name() != "open_files" || c.Target() != 0.8 {
		t.Errorf("open_files %v (target %v); want 0.45 (target 0.8)", c.Value(), c.Target())
	}
	err = errors.New("no /proc")
	c.SampleAt(t0.Add(time.Second))
	if r := c.Reading(); !math.IsNaN(c.Value()) || r.Err == nil {
		t.Errorf("unreadable: Value %v, err %v; want NaN and the error", c.Value(), r.Err)
	}
	err, limit = nil, 0
	c.SampleAt(t0.Add(2 * time.Second))
	if !math.IsNaN(c.Value()) {
		t.Errorf("limit 0: Value %v; want NaN", c.Value())
	}
	g := NewGoroutines(10_000)
	g.SampleAt(t0)
	if r := g.Reading(); g.Name() != "goroutines" || r.Limit != 10_000 || r.Count < 1 || g.Value() != float64(r.Count)/10_000 {
		t.Errorf("goroutines: %+v; want the live count over 10000", r)
	}
}

// TestOpenFilesReal counts this process's descriptors on Linux: opening
// files raises the count by as many, and the limit is RLIMIT_NOFILE.
func TestOpenFilesReal(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("descriptors are counted on Linux")
	}
	read := openFiles()
	before, limit, err := read()
	if err != nil {
		t.Fatal(err)
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || limit != int64(rl.Cur) {
		t.Errorf("limit %d; want RLIMIT_NOFILE %d (%v)", limit, rl.Cur, err)
	}
	var files []*os.File
	for range 40 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	after, _, err := read()
	for _, f := range files {
		f.Close()
	}
	if err != nil || after-before != 40 {
		t.Errorf("%d descriptors before, %d after opening 40 (%v); want 40 more", before, after, err)
	}
}

func TestCountDirents(t *testing.T) {
	// Two records of 24 bytes: "." and "12"; a truncated third is ignored.
	rec := func(name string) []byte {
		b := make([]byte, 24)
		b[16] = 24
		copy(b[19:], name)
		return b
	}
	buf := append(append(append(rec("."), rec("..")...), rec("12")...), 1, 2, 3)
	if got := countDirents(buf); got != 1 {
		t.Errorf("countDirents = %d; want 1 (\".\" and \"..\" not counted)", got)
	}
	if got := countDirents([]byte{0, 0, 0}); got != 0 {
		t.Errorf("countDirents(short) = %d; want 0", got)
	}
}

func TestResourceOptions(t *testing.T) {
	tests := []struct {
		f    func()
		want string
	}{
		{func() { NewMemory(WithMemoryTarget(-0.1)) }, "WithMemoryTarget(-0.1): must be in (0, 1] (0 means the default, 0.8)"},
		{func() { NewMemory(WithMemoryTarget(1.5)) }, "WithMemoryTarget(1.5): must be in (0, 1] (0 means the default, 0.8)"},
		{func() { NewMemory(WithMemoryPeriod(time.Hour)) }, "WithMemoryPeriod(1h0m0s): must be in [10ms, 1m] (0 means the default, 100ms)"},
		{func() { NewGCCPU(WithGCTarget(math.NaN())) }, "WithGCTarget(NaN): must be in (0, 1] (0 means the default, 0.3)"},
		{func() { NewGoroutines(0) }, "NewGoroutines(0): the ceiling must be ≥ 1"},
		{func() { NewOpenFiles(WithCountTarget(2)) }, "WithCountTarget(2): must be in (0, 1] (0 means the default)"},
		{func() { NewOpenFiles(WithCountPeriod(time.Hour)) }, "WithCountPeriod(1h0m0s): must be in [10ms, 1m] (0 means the default, 1s)"},
	}
	for _, tt := range tests {
		if got, want := panicMessage(tt.f), "pressure: "+tt.want; got != want {
			t.Errorf("panicked with %q; want %q", got, want)
		}
	}
	m := NewMemory(WithMemoryTarget(0), WithMemoryPeriod(0), WithMemoryStats(nil))
	g := NewGCCPU(WithGCTarget(0), WithGCSource(nil))
	o := NewOpenFiles(WithCountTarget(0), WithCountSource(nil))
	if m.Target() != 0.8 || m.Period() != 100*time.Millisecond || m.cfg.stats == nil || g.Target() != 0.3 || g.cfg.read == nil ||
		o.Target() != 0.8 || o.cfg.read == nil {
		t.Errorf("zero and nil options did not give the defaults")
	}
}
