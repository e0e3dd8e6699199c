package cgroup

import (
	"errors"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// checkQuota holds any quota a parser accepted to the kernel's ranges: a
// parser that accepts garbage must not turn it into a plausible limit.
func checkQuota(t *testing.T, in string, q Quota) {
	t.Helper()
	if q.Period < time.Millisecond || q.Period > time.Second {
		t.Fatalf("%q: accepted period %v outside [1ms, 1s]", in, q.Period)
	}
	if !q.Unlimited() && q.Quota < time.Millisecond {
		t.Fatalf("%q: accepted quota %v below 1ms", in, q.Quota)
	}
	if c := q.Cores(); math.IsNaN(c) || c <= 0 {
		t.Fatalf("%q: accepted quota gives %v cores", in, c)
	}
}

func wantMalformed(t *testing.T, in string, err error) {
	t.Helper()
	if !errors.Is(err, ErrMalformed) || !strings.HasPrefix(err.Error(), "cgroup: ") {
		t.Fatalf("%q: error %v does not wrap ErrMalformed with a cgroup: prefix", in, err)
	}
}

func FuzzParseCPUMax(f *testing.F) {
	for _, s := range []string{"150000 100000\n", "max 100000\n", "50000 100000", "-1 100000", "max", "", "1000 1000\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		q, err := ParseCPUMax([]byte(in))
		if err != nil {
			wantMalformed(t, in, err)
			return
		}
		checkQuota(t, in, q)
		// Only the kernel's exact text is accepted: it formats back.
		if got := FormatCPUMax(q); got != strings.TrimSuffix(in, "\n") {
			t.Fatalf("ParseCPUMax(%q) = %v, formats back as %q", in, q, got)
		}
	})
}

func FuzzParseCFS(f *testing.F) {
	f.Add("200000\n", "100000\n")
	f.Add("-1\n", "100000\n")
	f.Add("0\n", "0\n")
	f.Fuzz(func(t *testing.T, quota, period string) {
		q, err := ParseCFS([]byte(quota), []byte(period))
		if err != nil {
			wantMalformed(t, quota+"|"+period, err)
			return
		}
		checkQuota(t, quota+"|"+period, q)
		wantQ := "-1"
		if !q.Unlimited() {
			wantQ = strconv.FormatInt(int64(q.Quota/time.Microsecond), 10)
		}
		wantP := strconv.FormatInt(int64(q.Period/time.Microsecond), 10)
		if strings.TrimSuffix(quota, "\n") != wantQ || strings.TrimSuffix(period, "\n") != wantP {
			t.Fatalf("ParseCFS(%q, %q) = %v: not what was written", quota, period, q)
		}
	})
}

func FuzzParseUsage(f *testing.F) {
	f.Add("usage_usec 44389555\nuser_usec 1\n")
	f.Add("46451608401\n")
	f.Fuzz(func(t *testing.T, in string) {
		if u, err := ParseCPUStatUsage([]byte(in)); err != nil {
			wantMalformed(t, in, err)
		} else if u < 0 {
			t.Fatalf("ParseCPUStatUsage(%q) = %v < 0", in, u)
		}
		if u, err := ParseCPUAcctUsage([]byte(in)); err != nil {
			wantMalformed(t, in, err)
		} else if strconv.FormatInt(int64(u), 10) != strings.TrimSuffix(in, "\n") {
			t.Fatalf("ParseCPUAcctUsage(%q) = %d: not what was written", in, u)
		}
	})
}

func FuzzParseCPUSet(f *testing.F) {
	for _, s := range []string{"0-1\n", "0-3,8,10-11", "", "3-1", "0-8191", "5,5,5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := ParseCPUSet([]byte(in))
		if err != nil {
			wantMalformed(t, in, err)
			return
		}
		if n < 1 || n > maxCPUs {
			t.Fatalf("ParseCPUSet(%q) = %d CPUs", in, n)
		}
	})
}

func FuzzParseProcCgroup(f *testing.F) {
	f.Add("4:cpu,cpuacct:/docker/abc\n0::/\n")
	f.Add("9:name=systemd:/\n1:cpu:/\n0::/\n")
	f.Fuzz(func(t *testing.T, in string) {
		es, err := ParseProcCgroup([]byte(in))
		if err != nil {
			wantMalformed(t, in, err)
			return
		}
		for _, e := range es {
			if e.ID < 0 || !strings.HasPrefix(e.Path, "/") {
				t.Fatalf("ParseProcCgroup(%q) accepted %+v", in, e)
			}
		}
	})
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add("32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n")
	f.Add("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:1 - cgroup2 cgroup2 rw\n")
	f.Add("1 2 3 / /a\\040b rw - x y z\n")
	f.Fuzz(func(t *testing.T, in string) {
		ms, err := ParseMountInfo([]byte(in))
		if err != nil {
			wantMalformed(t, in, err)
			return
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Root, "/") || !strings.HasPrefix(m.MountPoint, "/") || m.FSType == "" {
				t.Fatalf("ParseMountInfo(%q) accepted %+v", in, m)
			}
		}
	})
}

// FuzzFindCPU feeds arbitrary /proc/self/cgroup and mountinfo files over a
// v2 tree with a quota: FindCPU and Limit must fail cleanly or locate
// valid paths, never panic or escape the filesystem.
func FuzzFindCPU(f *testing.F) {
	f.Add("0::/app\n", "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	f.Add("1:cpu:/\n2:cpuacct:/\n0::/\n", "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
	f.Add("4:cpu,cpuacct:/../x\n", "33 31 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro - cgroup cgroup rw,cpu,cpuacct\n")
	f.Fuzz(func(t *testing.T, procCgroup, mountinfo string) {
		fsys := fstest.MapFS{
			"proc/self/cgroup":                 {Data: []byte(procCgroup)},
			"proc/self/mountinfo":              {Data: []byte(mountinfo)},
			"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpu cpuset\n")},
			"sys/fs/cgroup/app/cpu.max":        {Data: []byte("50000 100000\n")},
			"sys/fs/cgroup/app/cpu.stat":       {Data: []byte("usage_usec 5\n")},
		}
		c, err := FindCPU(fsys)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoCPUController) {
				t.Fatalf("FindCPU: unclassified error %v", err)
			}
			return
		}
		for _, h := range []Hierarchy{c.CPU, c.Acct, c.Set} {
			if h.Dir != "" && (!fs.ValidPath(h.Dir) || !fs.ValidPath(h.Mount) || !strings.HasPrefix(h.Dir, strings.TrimSuffix(h.Mount, "."))) {
				t.Fatalf("FindCPU located %+v: invalid or outside its mount", h)
			}
		}
		l, err := c.Limit()
		if err == nil && !l.Quota.Unlimited() && l.Quota.Cores() != 0.5 {
			t.Fatalf("Limit = %v cores; the only quota in the tree is 0.5", l.Quota.Cores())
		}
	})
}
