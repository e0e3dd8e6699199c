package pressure

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"testing"
	"testing/fstest"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeCPU is a process whose CPU time grows at busy cores per second of
// virtual time.
type fakeCPU struct {
	busy  float64
	used  time.Duration
	err   error
	calls int
}

func (f *fakeCPU) read() (time.Duration, error) { f.calls++; return f.used, f.err }

func (f *fakeCPU) advance(d time.Duration) { f.used += time.Duration(f.busy * float64(d)) }

func fixture(name string) fs.FS { return os.DirFS("../internal/cgroup/testdata/" + name) }

func newTestCPU(t *testing.T, fsys fs.FS, procs int, f *fakeCPU, opts ...CPUOption) *CPU {
	t.Helper()
	base := []CPUOption{
		WithCgroupFS(fsys),
		WithProcessCPU(f.read),
		WithMaxProcs(func() int { return procs }),
		WithCPUSmoothing(0),
	}
	c, err := NewCPU(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sampleFor samples every 100 ms of virtual time for d, the process burning
// f.busy cores, and returns the time reached.
func sampleFor(c *CPU, f *fakeCPU, now time.Time, d time.Duration) time.Time {
	c.SampleAt(now)
	for end := now.Add(d); now.Before(end); {
		now = now.Add(100 * time.Millisecond)
		f.advance(100 * time.Millisecond)
		c.SampleAt(now)
	}
	return now
}

// TestCPUAllowedCores is the point of "Where the queue really is": the
// denominator is the number of cores this process may use, so a saturated
// GOMAXPROCS=1 server on a 2-core host reads 1.0, not 0.5.
func TestCPUAllowedCores(t *testing.T) {
	tests := []struct {
		name    string
		fsys    fs.FS
		procs   int
		busy    float64
		want    float64
		bound   string
		cores   float64
		group   bool // a quota is set: the cgroup's share is read
		wantErr bool
	}{
		{name: "this host, GOMAXPROCS=1, one core busy", fsys: fixture("hybrid"), procs: 1, busy: 1, want: 1, bound: "GOMAXPROCS", cores: 1},
		{name: "this host, GOMAXPROCS=2, one core busy", fsys: fixture("hybrid"), procs: 2, busy: 1, want: 0.5, bound: "GOMAXPROCS", cores: 2},
		{name: "this host, GOMAXPROCS=8 set by hand: cpuset caps", fsys: fixture("hybrid"), procs: 8, busy: 1, want: 0.5, bound: "cpuset", cores: 2},
		{name: "v2 quota 1.5 cores", fsys: fixture("v2-quota"), procs: 4, busy: 1.2, want: 0.8, bound: "cgroup quota", cores: 1.5, group: true},
		{name: "v2 quota 1.5 cores above GOMAXPROCS=1", fsys: fixture("v2-quota"), procs: 1, busy: 0.9, want: 0.9, bound: "GOMAXPROCS", cores: 1, group: true},
		{name: "v2 max: cpuset", fsys: fixture("v2-max"), procs: 8, busy: 2, want: 0.5, bound: "cpuset", cores: 4},
		{name: "v2 half a core on the pod", fsys: fixture("v2-subcore-parent"), procs: 2, busy: 0.4, want: 0.8, bound: "cgroup quota", cores: 0.5, group: true},
		{name: "v2 namespace 2.5 cores", fsys: fixture("v2-namespace"), procs: 3, busy: 2, want: 0.8, bound: "cgroup quota", cores: 2.5, group: true},
		{name: "v1 quota 2 cores", fsys: fixture("v1-quota"), procs: 4, busy: 1, want: 0.5, bound: "cgroup quota", cores: 2, group: true},
		{name: "v1 no quota, cpuset of 3", fsys: fixture("v1-noquota"), procs: 4, busy: 1.5, want: 0.5, bound: "cpuset", cores: 3},
		{name: "v1 half a core on the parent", fsys: fixture("v1-subcore"), procs: 2, busy: 0.25, want: 0.5, bound: "cgroup quota", cores: 0.5, group: true},
		{name: "no cgroup: GOMAXPROCS", fsys: fixture("none"), procs: 2, busy: 1, want: 0.5, bound: "GOMAXPROCS", cores: 2},
		{name: "cgroup disabled", fsys: nil, procs: 1, busy: 1, want: 1, bound: "GOMAXPROCS", cores: 1},
		{name: "malformed quota: not trusted, GOMAXPROCS", fsys: fixture("v2-badquota"), procs: 2, busy: 1, want: 0.5, bound: "GOMAXPROCS", cores: 2, wantErr: true},
		{name: "GOMAXPROCS reported as 0 counts as 1", fsys: nil, procs: 0, busy: 0.5, want: 0.5, bound: "GOMAXPROCS", cores: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeCPU{busy: tt.busy}
			c := newTestCPU(t, tt.fsys, tt.procs, f)
			sampleFor(c, f, t0, time.Second)
			r := c.Reading()
			if math.Abs(c.Value()-tt.want) > 1e-9 || r.Bound != tt.bound || r.Cores != tt.cores {
				t.Errorf("Value = %v (cores %v, bound %s); want %v (cores %v, bound %s)", c.Value(), r.Cores, r.Bound, tt.want, tt.cores, tt.bound)
			}
			if (r.Err != nil) != tt.wantErr {
				t.Errorf("Reading().Err = %v; want error %v", r.Err, tt.wantErr)
			}
			// The quota cgroup's counter is read only where a quota is set
			// (fixture counters do not move: share 0), never without one.
			if tt.group && r.Group != 0 || !tt.group && !math.IsNaN(r.Group) {
				t.Errorf("Group = %v; want 0 with a quota, NaN without (group %v)", r.Group, tt.group)
			}
		})
	}
}

// mapFS is a cgroup v2 layout whose counters the test moves.
func v2MapFS(cgroupPath, quota string) fstest.MapFS {
	dir := "sys/fs/cgroup" + cgroupPath
	if cgroupPath == "/" {
		dir = "sys/fs/cgroup"
	}
	m := fstest.MapFS{
		"proc/self/cgroup":                 {Data: []byte("0::" + cgroupPath + "\n")},
		"proc/self/mountinfo":              {Data: []byte("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")},
		"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpu memory\n")},
		"sys/fs/cgroup/cpu.stat":           {Data: []byte("usage_usec 0\n")},
	}
	if quota != "" {
		m[dir+"/cpu.max"] = &fstest.MapFile{Data: []byte(quota + "\n")}
	}
	m[dir+"/cpu.stat"] = &fstest.MapFile{Data: []byte("usage_usec 0\n")}
	return m
}

func setUsage(m fstest.MapFS, file string, d time.Duration) {
	m[file] = &fstest.MapFile{Data: []byte("usage_usec " + itoa(int64(d/time.Microsecond)) + "\n")}
}

func itoa(n int64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// TestCPUQuotaShared: the container's 2-core quota is shared with another
// process that burns 1.8 cores; this process uses 0.2. Its own share reads
// 0.1, but the quota is exhausted and the kernel throttles everybody in the
// cgroup: the signal reads the cgroup's 1.0.
func TestCPUQuotaShared(t *testing.T) {
	m := v2MapFS("/app", "200000 100000")
	f := &fakeCPU{busy: 0.2}
	c := newTestCPU(t, m, 2, f)
	now := t0
	var group time.Duration
	for i := 0; i <= 10; i++ {
		setUsage(m, "sys/fs/cgroup/app/cpu.stat", group)
		c.SampleAt(now)
		now = now.Add(100 * time.Millisecond)
		f.advance(100 * time.Millisecond)
		group += 200 * time.Millisecond // 2 cores × 100 ms: ours and the other's
	}
	r := c.Reading()
	if math.Abs(r.Process-0.1) > 1e-9 || math.Abs(r.Group-1) > 1e-9 || math.Abs(c.Value()-1) > 1e-9 {
		t.Errorf("Reading = process %v, group %v, value %v; want 0.1, 1.0, 1.0", r.Process, r.Group, c.Value())
	}
}

// TestCPUHostCounterIgnored: at the root cgroup (no quota) the cgroup
// counter counts the whole host; a busy neighbour must not move the signal.
func TestCPUHostCounterIgnored(t *testing.T) {
	m := v2MapFS("/", "")
	f := &fakeCPU{busy: 0.1}
	c := newTestCPU(t, m, 2, f)
	now := t0
	var host time.Duration
	for i := 0; i <= 10; i++ {
		setUsage(m, "sys/fs/cgroup/cpu.stat", host)
		c.SampleAt(now)
		now = now.Add(100 * time.Millisecond)
		f.advance(100 * time.Millisecond)
		host += 200 * time.Millisecond // the host's 2 cores are saturated by others
	}
	if r := c.Reading(); math.Abs(c.Value()-0.05) > 1e-9 || !math.IsNaN(r.Group) {
		t.Errorf("Value = %v (group %v); want 0.05 from this process only, group NaN", c.Value(), r.Group)
	}
}

func TestCPUQuotaChange(t *testing.T) {
	m := v2MapFS("/app", "200000 100000")
	f := &fakeCPU{busy: 1}
	c := newTestCPU(t, m, 4, f)
	now := sampleFor(c, f, t0, time.Second)
	if got := c.Value(); math.Abs(got-0.5) > 1e-9 {
		t.Fatalf("1 core of a 2-core quota: Value = %v; want 0.5", got)
	}
	m["sys/fs/cgroup/app/cpu.max"] = &fstest.MapFile{Data: []byte("100000 100000\n")}
	sampleFor(c, f, now, 2*time.Second)
	if got := c.Value(); math.Abs(got-1) > 1e-9 {
		t.Errorf("2 s after the quota went 2 → 1 core: Value = %v; want 1 (limits re-read every second)", got)
	}
}

func TestCPUSmoothing(t *testing.T) {
	f := &fakeCPU{}
	c := newTestCPU(t, nil, 1, f, WithCPUSmoothing(200*time.Millisecond))
	now := sampleFor(c, f, t0, time.Second)
	if got := c.Value(); got != 0 {
		t.Fatalf("idle: Value = %v; want 0", got)
	}
	f.busy = 1
	tests := []struct {
		after time.Duration
		lo    float64
		hi    float64
	}{
		{100 * time.Millisecond, 0.39, 0.40}, // 1 - e^-0.5
		{200 * time.Millisecond, 0.63, 0.64}, // one time constant
		{600 * time.Millisecond, 0.95, 0.96}, // three
	}
	var elapsed time.Duration
	for _, tt := range tests {
		for elapsed < tt.after {
			now = now.Add(100 * time.Millisecond)
			f.advance(100 * time.Millisecond)
			c.SampleAt(now)
			elapsed += 100 * time.Millisecond
		}
		if got := c.Value(); got < tt.lo || got > tt.hi {
			t.Errorf("%v after an idle→busy step: Value = %.4f; want in [%v, %v]", tt.after, got, tt.lo, tt.hi)
		}
	}
}

func TestCPUSampleEdges(t *testing.T) {
	f := &fakeCPU{busy: 1}
	c := newTestCPU(t, nil, 1, f)
	if !math.IsNaN(c.Value()) {
		t.Errorf("before any sample: Value = %v; want NaN", c.Value())
	}
	c.SampleAt(t0)
	if !math.IsNaN(c.Value()) {
		t.Errorf("after one sample: Value = %v; want NaN (no interval yet)", c.Value())
	}
	f.advance(100 * time.Millisecond)
	c.SampleAt(t0.Add(100 * time.Millisecond))
	if c.Value() != 1 {
		t.Errorf("after two samples: Value = %v; want 1", c.Value())
	}
	// Same or earlier time: ignored.
	f.advance(time.Second)
	c.SampleAt(t0.Add(100 * time.Millisecond))
	c.SampleAt(t0)
	if c.Value() != 1 {
		t.Errorf("after samples at stale times: Value = %v; want unchanged 1", c.Value())
	}
	// A failing reader keeps the value and reports the error.
	f.err = errors.New("boom")
	c.SampleAt(t0.Add(time.Second))
	if r := c.Reading(); c.Value() != 1 || r.Err == nil {
		t.Errorf("reader error: Value = %v, Err = %v; want 1 and the error", c.Value(), r.Err)
	}
}

func TestCPUBadOptions(t *testing.T) {
	tests := []struct {
		opt  CPUOption
		want string
	}{
		{WithCPUTarget(-1), "WithCPUTarget(-1): must be in (0, 2] (0 means the default, 0.95)"},
		{WithCPUTarget(math.NaN()), "WithCPUTarget(NaN): must be in (0, 2] (0 means the default, 0.95)"},
		{WithCPUTarget(3), "WithCPUTarget(3): must be in (0, 2] (0 means the default, 0.95)"},
		{WithCPUPeriod(time.Millisecond), "WithCPUPeriod(1ms): must be in [10ms, 1m] (0 means the default, 50ms)"},
		{WithCPUPeriod(time.Hour), "WithCPUPeriod(1h0m0s): must be in [10ms, 1m] (0 means the default, 50ms)"},
		{WithCPUSmoothing(-time.Second), "WithCPUSmoothing(-1s): must be in [0, 1m] (0 means none)"},
	}
	for _, tt := range tests {
		c, err := NewCPU(tt.opt)
		if want := "pressure: " + tt.want; c != nil || err == nil || err.Error() != want {
			t.Errorf("NewCPU = %v, %v; want the error %q", c, err, want)
		}
	}
	c, err := NewCPU(WithCPUTarget(0.9), WithCPUPeriod(70*time.Millisecond))
	if err != nil || c.Target() != 0.9 || c.Period() != 70*time.Millisecond || c.Name() != "cpu" {
		t.Errorf("NewCPU(valid) = %v, %v", c, err)
	}
	// Zero and nil mean the defaults.
	c, err = NewCPU(WithCPUTarget(0), WithCPUPeriod(0), WithProcessCPU(nil), WithMaxProcs(nil))
	if err != nil || c.Target() != 0.95 || c.Period() != 50*time.Millisecond || c.cfg.usage == nil || c.cfg.procs == nil {
		t.Errorf("NewCPU(zero options) = %v, %v; want the defaults", c, err)
	}
}

// TestCPUReal reads this machine: two samples of the real process a
// little apart must give a finite, non-negative value.
func TestCPUReal(t *testing.T) {
	c, err := NewCPU()
	if err != nil {
		t.Fatal(err)
	}
	c.SampleAt(time.Now())
	x := 0
	for i := range 1000000 {
		x += i
	}
	_ = x
	c.SampleAt(time.Now().Add(100 * time.Millisecond))
	if v := c.Value(); math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		t.Errorf("Value = %v; want a finite non-negative reading (%+v)", v, c.Reading())
	}
	t.Logf("%+v", c.Reading())
}
