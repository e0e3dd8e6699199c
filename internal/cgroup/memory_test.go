package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

func TestFindMemoryFixtures(t *testing.T) {
	tests := []struct {
		fixture          string
		version          Version
		dir              string
		max, high, bytes int64
		maxDir, highDir  string
	}{
		// This machine: v1 memory at /process_api/<id>, the kernel's
		// "unlimited" there and at the root.
		{"hybrid", 1, "sys/fs/cgroup/memory/process_api/3313f4edcfec87e417ce512e36153219", -1, -1, -1, "", ""},
		{"v1-quota", 1, "sys/fs/cgroup/memory", 512 << 20, -1, 512 << 20, "sys/fs/cgroup/memory", ""},
		{"v1-noquota", 1, "sys/fs/cgroup/memory", -1, -1, -1, "", ""},
		// A Kubernetes pod's limit on the parent, memory.high on the
		// container: the tighter binds.
		{"v2-quota", 2, "sys/fs/cgroup/kubepods.slice/pod1/ctr", 1 << 30, 768 << 20, 768 << 20,
			"sys/fs/cgroup/kubepods.slice/pod1", "sys/fs/cgroup/kubepods.slice/pod1/ctr"},
		{"v2-max", 2, "sys/fs/cgroup/system.slice/app.service", -1, -1, -1, "", ""},
		{"v2-namespace", 2, "sys/fs/cgroup", 256 << 20, -1, 256 << 20, "sys/fs/cgroup", ""},
		{"v2-root", 2, "sys/fs/cgroup", -1, -1, -1, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			m, err := FindMemory(os.DirFS("testdata/" + tt.fixture))
			if err != nil {
				t.Fatalf("FindMemory: %v", err)
			}
			if m.Version != tt.version || m.Mem.Dir != tt.dir {
				t.Errorf("FindMemory = %v; want v%d dir %s", m, tt.version, tt.dir)
			}
			l, err := m.Limit()
			if err != nil {
				t.Fatalf("Limit: %v", err)
			}
			if l.Max != tt.max || l.High != tt.high || l.Bytes() != tt.bytes || l.MaxDir != tt.maxDir || l.HighDir != tt.highDir {
				t.Errorf("Limit = %+v (bytes %d); want max %d in %q, high %d in %q, bytes %d",
					l, l.Bytes(), tt.max, tt.maxDir, tt.high, tt.highDir, tt.bytes)
			}
		})
	}
}

func TestFindMemoryErrors(t *testing.T) {
	for _, fixture := range []string{"none", "does-not-exist"} {
		if _, err := FindMemory(os.DirFS("testdata/" + fixture)); !errors.Is(err, ErrNoMemoryController) {
			t.Errorf("FindMemory(%s) error = %v; want ErrNoMemoryController", fixture, err)
		}
	}
	// The hybrid host's cgroup2 has no memory controller: found through v1.
	noMem := fstest.MapFS{
		"proc/self/cgroup":                 {Data: []byte("0::/app\n")},
		"proc/self/mountinfo":              {Data: []byte("30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")},
		"sys/fs/cgroup/cgroup.controllers": {Data: []byte("cpu pids\n")},
	}
	if _, err := FindMemory(noMem); !errors.Is(err, ErrNoMemoryController) {
		t.Errorf("FindMemory(v2 without memory) error = %v; want ErrNoMemoryController", err)
	}
	m, err := FindMemory(os.DirFS("testdata/mem-v2-badmax"))
	if err != nil {
		t.Fatal(err)
	}
	if l, err := m.Limit(); !errors.Is(err, ErrMalformed) {
		t.Errorf("Limit(mem-v2-badmax) = %+v, %v; want ErrMalformed, not a guessed limit", l, err)
	}
}

func TestParseMemory(t *testing.T) {
	tests := []struct {
		in      string
		v2, v1  int64
		v2Error bool
		v1Error bool
	}{
		{"max\n", -1, 0, false, true},
		{"536870912\n", 536870912, 536870912, false, false},
		{"0\n", 0, 0, false, false},
		{"9223372036854771712\n", -1, -1, false, false}, // v1's "unlimited"
		{"4611686018427387904\n", -1, -1, false, false}, // 2^62
		{"1G\n", 0, 0, true, true},
		{"-1\n", 0, 0, true, true},
		{"0100\n", 0, 0, true, true},
		{" 100\n", 0, 0, true, true},
		{"100\n100\n", 0, 0, true, true},
		{"", 0, 0, true, true},
		{"99999999999999999999\n", 0, 0, true, true},
	}
	for _, tt := range tests {
		n, err := ParseMemoryMax([]byte(tt.in), "memory.max")
		if (err != nil) != tt.v2Error || err == nil && n != tt.v2 {
			t.Errorf("ParseMemoryMax(%q) = %d, %v; want %d (error %v)", tt.in, n, err, tt.v2, tt.v2Error)
		}
		if err != nil {
			wantMalformed(t, tt.in, err)
		}
		n, err = ParseMemoryLimitInBytes([]byte(tt.in))
		if (err != nil) != tt.v1Error || err == nil && n != tt.v1 {
			t.Errorf("ParseMemoryLimitInBytes(%q) = %d, %v; want %d (error %v)", tt.in, n, err, tt.v1, tt.v1Error)
		}
		if err != nil {
			wantMalformed(t, tt.in, err)
		}
	}
}

// checkMemory holds an accepted limit to what the kernel can write: -1
// (none) or a byte count below 2^62 that formats back as the input.
func checkMemory(t *testing.T, in string, n int64) {
	t.Helper()
	if n < -1 || n >= maxMemory {
		t.Fatalf("%q: accepted limit %d", in, n)
	}
	if n >= 0 && strconv.FormatInt(n, 10) != strings.TrimSuffix(in, "\n") {
		t.Fatalf("%q: accepted as %d, not what was written", in, n)
	}
}

func FuzzParseMemoryMax(f *testing.F) {
	for _, s := range []string{"max\n", "536870912\n", "0", "1G", "-1\n", "9223372036854771712\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := ParseMemoryMax([]byte(in), "memory.max")
		if err != nil {
			wantMalformed(t, in, err)
			return
		}
		if in != "max" && in != "max\n" {
			if v, ok := parseUint(strings.TrimSuffix(in, "\n")); !ok || v < maxMemory {
				checkMemory(t, in, n)
			}
		}
	})
}

func FuzzParseMemoryLimitInBytes(f *testing.F) {
	for _, s := range []string{"536870912\n", "9223372036854771712\n", "0", "-1", "max"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		n, err := ParseMemoryLimitInBytes([]byte(in))
		if err != nil {
			wantMalformed(t, in, err)
			return
		}
		if v, _ := parseUint(strings.TrimSuffix(in, "\n")); v < maxMemory {
			checkMemory(t, in, n)
		} else if n != -1 {
			t.Fatalf("%q: %d; want -1 (no limit)", in, n)
		}
	})
}

// FuzzFindMemory feeds arbitrary /proc/self/cgroup and mountinfo files over
// a tree with a v2 limit and a v1 one: FindMemory and Limit must fail
// cleanly or locate valid paths and one of the limits in the tree.
func FuzzFindMemory(f *testing.F) {
	f.Add("0::/app\n", "30 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
	f.Add("4:memory:/process_api/x\n0::/\n", "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n")
	f.Add("4:memory:/../x\n", "35 31 0:32 /docker/abc /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n")
	f.Fuzz(func(t *testing.T, procCgroup, mountinfo string) {
		fsys := fstest.MapFS{
			"proc/self/cgroup":                           {Data: []byte(procCgroup)},
			"proc/self/mountinfo":                        {Data: []byte(mountinfo)},
			"sys/fs/cgroup/cgroup.controllers":           {Data: []byte("cpu memory\n")},
			"sys/fs/cgroup/app/memory.max":               {Data: []byte("268435456\n")},
			"sys/fs/cgroup/app/memory.high":              {Data: []byte("max\n")},
			"sys/fs/cgroup/memory/memory.limit_in_bytes": {Data: []byte("536870912\n")},
		}
		m, err := FindMemory(fsys)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNoMemoryController) {
				t.Fatalf("FindMemory: unclassified error %v", err)
			}
			return
		}
		h := m.Mem
		if !fs.ValidPath(h.Dir) || !fs.ValidPath(h.Mount) || !strings.HasPrefix(h.Dir, strings.TrimSuffix(h.Mount, ".")) {
			t.Fatalf("FindMemory located %+v: invalid or outside its mount", h)
		}
		l, err := m.Limit()
		if err == nil && l.Bytes() != -1 && l.Bytes() != 256<<20 && l.Bytes() != 512<<20 {
			t.Fatalf("Limit = %d bytes; the tree holds only 256 MiB and 512 MiB", l.Bytes())
		}
	})
}
