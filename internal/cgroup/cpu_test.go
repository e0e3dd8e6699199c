package cgroup

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestFindCPUFixtures(t *testing.T) {
	tests := []struct {
		fixture  string
		version  Version
		cpuDir   string
		cores    float64 // Limit.Cores
		quotaDir string
		cpus     int
		usage    time.Duration // cgroup usage of QuotaDir; only with a quota
	}{
		{"v2-quota", 2, "sys/fs/cgroup/kubepods.slice/pod1/ctr", 1.5, "sys/fs/cgroup/kubepods.slice/pod1/ctr", 8, 12345678 * time.Microsecond},
		{"v2-max", 2, "sys/fs/cgroup/system.slice/app.service", 4, "", 4, 0},
		{"v2-subcore-parent", 2, "sys/fs/cgroup/kubepods/pod2/ctr", 0.5, "sys/fs/cgroup/kubepods/pod2", 0, 777 * time.Millisecond},
		{"v2-namespace", 2, "sys/fs/cgroup", 2.5, "sys/fs/cgroup", 0, 42 * time.Second},
		{"v2-root", 2, "sys/fs/cgroup", 16, "", 16, 0},
		{"v1-quota", 1, "sys/fs/cgroup/cpu,cpuacct", 2, "sys/fs/cgroup/cpu,cpuacct", 4, 31415926535},
		{"v1-noquota", 1, "sys/fs/cgroup/cpu,cpuacct", 3, "", 3, 0},
		{"v1-subcore", 1, "sys/fs/cgroup/cpu/batch/job7", 0.5, "sys/fs/cgroup/cpu/batch", 0, 2 * time.Second},
		// This machine: v1 cpu and cpuacct at "/" with no quota; the
		// cgroup2 at /sys/fs/cgroup/unified has no cpu controller and its
		// root cpu.stat counts the whole host, so it must not be used.
		{"hybrid", 1, "sys/fs/cgroup/cpu", 2, "", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			c, err := FindCPU(os.DirFS("testdata/" + tt.fixture))
			if err != nil {
				t.Fatalf("FindCPU: %v", err)
			}
			if c.Version != tt.version || c.CPU.Dir != tt.cpuDir {
				t.Errorf("FindCPU = %v (dir %s); want v%d dir %s", c, c.CPU.Dir, tt.version, tt.cpuDir)
			}
			l, err := c.Limit()
			if err != nil {
				t.Fatalf("Limit: %v", err)
			}
			if got := l.Cores(); got != tt.cores || l.QuotaDir != tt.quotaDir || l.CPUs != tt.cpus {
				t.Errorf("Limit = %v cores (quota %v in %q, %d cpus); want %v cores in %q, %d cpus",
					got, l.Quota.Cores(), l.QuotaDir, l.CPUs, tt.cores, tt.quotaDir, tt.cpus)
			}
			u, err := c.Usage(l)
			if tt.quotaDir == "" {
				if err == nil {
					t.Errorf("Usage without a quota = %v; want an error (the cgroup is not this process's)", u)
				}
				return
			}
			if err != nil || u != tt.usage {
				t.Errorf("Usage = %v, %v; want %v", u, err, tt.usage)
			}
		})
	}
}

func TestFindCPUErrors(t *testing.T) {
	if _, err := FindCPU(os.DirFS("testdata/none")); !errors.Is(err, ErrNoCPUController) {
		t.Errorf("FindCPU(none) error = %v; want ErrNoCPUController", err)
	}
	if _, err := FindCPU(os.DirFS("testdata/does-not-exist")); !errors.Is(err, ErrNoCPUController) {
		t.Errorf("FindCPU(missing) error = %v; want ErrNoCPUController", err)
	}
	c, err := FindCPU(os.DirFS("testdata/v2-badquota"))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := c.Limit(); !errors.Is(err, ErrMalformed) {
		t.Errorf("Limit(v2-badquota) = %v, %v; want ErrMalformed, not a wrong quota", l, err)
	}
}
