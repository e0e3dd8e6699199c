package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strings"
)

// ErrNoMemoryController is returned (wrapped) by FindMemory when this
// process has no usable cgroup memory controller: no cgroup filesystem, the
// memory controller attached to neither hierarchy, or /proc unreadable (not
// Linux).
var ErrNoMemoryController = errors.New("cgroup: no memory controller")

// Memory locates this process's memory controller. It is found once by
// FindMemory; Limit reads the files again on every call. A Memory is safe
// for concurrent use if its fs.FS is.
type Memory struct {
	fsys fs.FS
	// Version of the hierarchy that holds the memory controller.
	Version Version
	// Mem is where the limits are (v2 memory.max and memory.high, v1
	// memory.limit_in_bytes).
	Mem Hierarchy
}

// String describes the layout, e.g. "cgroup v1 memory=sys/fs/cgroup/memory".
func (m *Memory) String() string {
	return fmt.Sprintf("cgroup v%d memory=%s", m.Version, m.Mem.Dir)
}

// FindMemory reads proc/self/cgroup and proc/self/mountinfo from fsys
// (usually os.DirFS("/")) and locates this process's memory controller: the
// cgroup v1 memory hierarchy when it is mounted (on a hybrid host the
// "0::/" line names a v2 hierarchy without it), else the cgroup v2
// hierarchy whose cgroup.controllers lists "memory".
func FindMemory(fsys fs.FS) (*Memory, error) {
	entries, mounts, err := readProc(fsys, ErrNoMemoryController)
	if err != nil {
		return nil, err
	}
	if h, ok := v1(entries, mounts, "memory"); ok {
		return &Memory{fsys: fsys, Version: 1, Mem: h}, nil
	}
	if h, ok := v2(entries, mounts); ok {
		ctl, err := fs.ReadFile(fsys, path.Join(h.Mount, "cgroup.controllers"))
		if err == nil && has(strings.Fields(string(ctl)), "memory") {
			return &Memory{fsys: fsys, Version: 2, Mem: h}, nil
		}
	}
	return nil, fmt.Errorf("%w: neither a cgroup v1 memory controller nor a cgroup v2 hierarchy with memory enabled", ErrNoMemoryController)
}

// MemoryLimit is the memory a cgroup lets this process's group use.
type MemoryLimit struct {
	// Max is the hard limit in bytes: beyond it the kernel reclaims and then
	// kills (v2 memory.max, v1 memory.limit_in_bytes); -1 when none is set.
	Max int64
	// High is the v2 throttle point (memory.high): beyond it the kernel
	// reclaims hard and slows the group down; -1 when none is set, always
	// on v1.
	High int64
	// MaxDir and HighDir are the directories whose limits bind ("" when
	// unlimited).
	MaxDir, HighDir string
}

// Bytes returns the tighter of Max and High, or -1 when neither is set.
func (l MemoryLimit) Bytes() int64 {
	switch {
	case l.Max < 0:
		return l.High
	case l.High < 0:
		return l.Max
	}
	return min(l.Max, l.High)
}

// Limit reads the limits of the process's cgroup and of each ancestor up
// to the mount point and keeps the tightest of each kind (a parent's limit,
// such as a Kubernetes pod's, binds its children). Missing files are
// skipped (the root cgroup has none); a malformed file is an error.
func (m *Memory) Limit() (MemoryLimit, error) {
	l := MemoryLimit{Max: -1, High: -1}
	for dir := range up(m.Mem) {
		maxFile := "memory.max"
		if m.Version == 1 {
			maxFile = "memory.limit_in_bytes"
		}
		if err := m.tighten(&l.Max, &l.MaxDir, dir, maxFile); err != nil {
			return MemoryLimit{}, err
		}
		if m.Version == 2 {
			if err := m.tighten(&l.High, &l.HighDir, dir, "memory.high"); err != nil {
				return MemoryLimit{}, err
			}
		}
	}
	return l, nil
}

// tighten lowers *limit to the one in dir/file if that is set and lower.
func (m *Memory) tighten(limit *int64, where *string, dir, file string) error {
	data, err := fs.ReadFile(m.fsys, path.Join(dir, file))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	var n int64
	if m.Version == 1 {
		n, err = ParseMemoryLimitInBytes(data)
	} else {
		n, err = ParseMemoryMax(data, file)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	if n >= 0 && (*limit < 0 || n < *limit) {
		*limit, *where = n, dir
	}
	return nil
}

// maxMemory bounds a limit the parsers accept: the kernel's "unlimited" of
// cgroup v1 (PAGE_COUNTER_MAX pages, just under 2^63 bytes) and anything at
// or above 2^62 bytes (4 EiB, far beyond any machine) mean no limit.
const maxMemory = 1 << 62

// ParseMemoryMax parses a cgroup v2 memory.max or memory.high file (file
// names it in errors): a byte count, or "max" for no limit (returned as
// -1). Anything else (signs, leading zeros, suffixes, extra lines) is an
// error wrapping ErrMalformed.
func ParseMemoryMax(data []byte, file string) (int64, error) {
	s, ok := oneLine(data)
	if !ok {
		return 0, malformed(file, "want one line, got %s", clip(string(data)))
	}
	if s == "max" {
		return -1, nil
	}
	n, ok := parseUint(s)
	if !ok {
		return 0, malformed(file, "bad limit %s", clip(s))
	}
	if n >= maxMemory {
		return -1, nil
	}
	return int64(n), nil
}

// ParseMemoryLimitInBytes parses a cgroup v1 memory.limit_in_bytes file: a
// byte count, where the kernel's "unlimited" (9223372036854771712 with 4 KiB
// pages) and any other value at or above 2^62 mean no limit (returned as
// -1). Anything else is an error wrapping ErrMalformed.
func ParseMemoryLimitInBytes(data []byte) (int64, error) {
	s, ok := oneLine(data)
	n, ok2 := parseUint(s)
	if !ok || !ok2 {
		return 0, malformed("memory.limit_in_bytes", "bad limit %s", clip(string(data)))
	}
	if n >= maxMemory || n > math.MaxInt64 {
		return -1, nil
	}
	return int64(n), nil
}
