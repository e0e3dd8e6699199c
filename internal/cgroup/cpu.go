package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"strings"
	"time"
)

// ErrNoCPUController is returned (wrapped) by FindCPU when this process has
// no usable cgroup CPU controller: no cgroup filesystem, the cpu controller
// attached to neither hierarchy, or /proc unreadable (not Linux).
var ErrNoCPUController = errors.New("cgroup: no cpu controller")

// Version is the cgroup hierarchy version: 1 or 2.
type Version int

// Hierarchy locates one controller for this process, as paths in the fs.FS
// given to FindCPU (no leading slash, "." for the root).
type Hierarchy struct {
	// Mount is the controller's mount point, the highest directory visible.
	Mount string
	// Dir is this process's cgroup directory, Mount or below.
	Dir string
}

// CPU locates this process's CPU controllers. It is found once by FindCPU;
// Limit and Usage read the files again on every call. A CPU is safe for
// concurrent use if its fs.FS is.
type CPU struct {
	fsys fs.FS
	// Version of the hierarchy that holds the cpu controller.
	Version Version
	// CPU holds the bandwidth limit (v2 cpu.max, v1 cpu.cfs_quota_us).
	CPU Hierarchy
	// Acct holds the usage counter (v2 cpu.stat, v1 cpuacct.usage); Dir is
	// "" when v1 has no cpuacct controller mounted.
	Acct Hierarchy
	// Set holds the cpuset; Dir is "" when there is none.
	Set Hierarchy
}

// String describes the layout, e.g. "cgroup v1 cpu=sys/fs/cgroup/cpu".
func (c *CPU) String() string {
	s := fmt.Sprintf("cgroup v%d cpu=%s", c.Version, c.CPU.Dir)
	if c.Acct.Dir != "" && c.Acct.Dir != c.CPU.Dir {
		s += " cpuacct=" + c.Acct.Dir
	}
	return s
}

// FindCPU reads proc/self/cgroup and proc/self/mountinfo from fsys (usually
// os.DirFS("/"); tests pass a fixture tree) and locates the cpu, cpuacct and
// cpuset controllers of this process.
//
// The cgroup v1 cpu controller wins when it is mounted: on a hybrid host
// (v1 controllers plus an empty cgroup2 at /sys/fs/cgroup/unified) the
// "0::/" line names a v2 hierarchy without the cpu controller, whose root
// cpu.stat counts the whole host. cgroup v2 is used only when its
// cgroup.controllers lists "cpu".
func FindCPU(fsys fs.FS) (*CPU, error) {
	entries, mounts, err := readProc(fsys, ErrNoCPUController)
	if err != nil {
		return nil, err
	}
	c := &CPU{fsys: fsys}
	if h, ok := v1(entries, mounts, "cpu"); ok {
		c.Version, c.CPU = 1, h
		c.Acct, _ = v1(entries, mounts, "cpuacct")
		c.Set, _ = v1(entries, mounts, "cpuset")
		return c, nil
	}
	if h, ok := v2(entries, mounts); ok {
		ctl, err := fs.ReadFile(fsys, path.Join(h.Mount, "cgroup.controllers"))
		if err == nil && has(strings.Fields(string(ctl)), "cpu") {
			c.Version, c.CPU, c.Acct = 2, h, h
			if has(strings.Fields(string(ctl)), "cpuset") {
				c.Set = h
			}
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: neither a cgroup v1 cpu controller nor a cgroup v2 hierarchy with cpu enabled", ErrNoCPUController)
}

// readProc reads and parses proc/self/cgroup and proc/self/mountinfo; an
// unreadable file is an error wrapping none (the caller's "no controller").
func readProc(fsys fs.FS, none error) ([]Entry, []Mount, error) {
	pc, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", none, err)
	}
	entries, err := ParseProcCgroup(pc)
	if err != nil {
		return nil, nil, err
	}
	mi, err := fs.ReadFile(fsys, "proc/self/mountinfo")
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", none, err)
	}
	mounts, err := ParseMountInfo(mi)
	if err != nil {
		return nil, nil, err
	}
	return entries, mounts, nil
}

func v1(entries []Entry, mounts []Mount, ctl string) (Hierarchy, bool) {
	for _, e := range entries {
		if e.ID == 0 || !has(e.Controllers, ctl) {
			continue
		}
		if m, ok := pick(mounts, e.Path, func(m Mount) bool { return m.FSType == "cgroup" && has(m.SuperOptions, ctl) }); ok {
			return locate(m, e.Path)
		}
	}
	return Hierarchy{}, false
}

func v2(entries []Entry, mounts []Mount) (Hierarchy, bool) {
	for _, e := range entries {
		if e.ID != 0 || len(e.Controllers) != 0 {
			continue
		}
		if m, ok := pick(mounts, e.Path, func(m Mount) bool { return m.FSType == "cgroup2" }); ok {
			return locate(m, e.Path)
		}
	}
	return Hierarchy{}, false
}

// pick returns the first mount accepted by ok whose root contains p, else
// the first accepted mount at all.
func pick(mounts []Mount, p string, ok func(Mount) bool) (Mount, bool) {
	var first *Mount
	for i := range mounts {
		if !ok(mounts[i]) {
			continue
		}
		if under(p, mounts[i].Root) {
			return mounts[i], true
		}
		if first == nil {
			first = &mounts[i]
		}
	}
	if first == nil {
		return Mount{}, false
	}
	return *first, true
}

// under reports whether p is root or below it.
func under(p, root string) bool {
	return root == "/" || p == root || strings.HasPrefix(p, root+"/")
}

// locate maps the process's cgroup path onto the mount. A path outside the
// mounted root (a cgroup namespace shows "/.." paths, or "/" inside a
// container whose mount is the container's own cgroup) maps to the mount
// point itself. A mount point that is no valid fs.FS path (invalid UTF-8)
// is not usable.
func locate(m Mount, p string) (Hierarchy, bool) {
	mp := fsPath(m.MountPoint)
	if !fs.ValidPath(mp) {
		return Hierarchy{}, false
	}
	h := Hierarchy{Mount: mp, Dir: mp}
	if !under(p, m.Root) {
		return h, true
	}
	rel := strings.TrimPrefix(p, m.Root)
	d := path.Join(mp, rel)
	if fs.ValidPath(d) && (d == mp || mp == "." || strings.HasPrefix(d, mp+"/")) {
		h.Dir = d // "/.." paths that climb out of the mount stay at the mount
	}
	return h, true
}

func fsPath(p string) string {
	p = strings.TrimPrefix(path.Clean(p), "/")
	if p == "" {
		return "."
	}
	return p
}

// Limit is the CPU a cgroup lets this process use.
type Limit struct {
	// Quota is the tightest bandwidth limit on the way from the process's
	// cgroup up to the mount point; Unlimited when none is set.
	Quota Quota
	// QuotaDir is the directory whose quota binds ("" when unlimited).
	QuotaDir string
	// CPUs is the number of CPUs in the effective cpuset, 0 when unknown.
	CPUs int
}

// Cores returns the cores the cgroup allows: the smaller of the quota and
// the cpuset size, +Inf when neither limits.
func (l Limit) Cores() float64 {
	c := l.Quota.Cores()
	if l.CPUs > 0 {
		c = math.Min(c, float64(l.CPUs))
	}
	return c
}

// Limit reads the quota of the process's cgroup and of each ancestor up to
// the mount point (a quota on a parent, such as a Kubernetes pod, binds its
// children) and the effective cpuset. Missing files are skipped (the root
// cgroup has no cpu.max); a malformed file is an error.
func (c *CPU) Limit() (Limit, error) {
	l := Limit{Quota: Quota{Quota: -1, Period: 100 * time.Millisecond}}
	for dir := range up(c.CPU) {
		q, err := c.quota(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Limit{}, fmt.Errorf("%s: %w", dir, err)
		}
		if !q.Unlimited() && q.Cores() < l.Quota.Cores() {
			l.Quota, l.QuotaDir = q, dir
		}
	}
	if c.Set.Dir != "" {
		name := "cpuset.cpus.effective"
		if c.Version == 1 {
			name = "cpuset.effective_cpus"
		}
		data, err := fs.ReadFile(c.fsys, path.Join(c.Set.Dir, name))
		if err == nil {
			n, err := ParseCPUSet(data)
			if err != nil {
				return Limit{}, err
			}
			l.CPUs = n
		}
	}
	return l, nil
}

func (c *CPU) quota(dir string) (Quota, error) {
	if c.Version == 2 {
		data, err := fs.ReadFile(c.fsys, path.Join(dir, "cpu.max"))
		if err != nil {
			return Quota{}, err
		}
		return ParseCPUMax(data)
	}
	q, err := fs.ReadFile(c.fsys, path.Join(dir, "cpu.cfs_quota_us"))
	if err != nil {
		return Quota{}, err
	}
	p, err := fs.ReadFile(c.fsys, path.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return Quota{}, err
	}
	return ParseCFS(q, p)
}

// up yields h.Dir and its parents up to and including h.Mount.
func up(h Hierarchy) func(func(string) bool) {
	return func(yield func(string) bool) {
		dir := h.Dir
		for {
			if !yield(dir) || dir == h.Mount || dir == "." {
				return
			}
			parent := path.Dir(dir)
			if len(parent) < len(h.Mount) {
				return
			}
			dir = parent
		}
	}
}

// Usage returns the cumulative CPU time of every process in the cgroup
// whose quota binds (l.QuotaDir from Limit): v2 cpu.stat usage_usec, v1
// cpuacct.usage in the cpuacct directory as many levels up from the
// process's as QuotaDir is from its cpu directory. It is an error to ask
// without a quota: the usage of an unlimited cgroup, the root especially,
// is not this process's.
func (c *CPU) Usage(l Limit) (time.Duration, error) {
	if l.QuotaDir == "" {
		return 0, errors.New("cgroup: usage asked for a cgroup without a quota")
	}
	if c.Version == 2 {
		data, err := fs.ReadFile(c.fsys, path.Join(l.QuotaDir, "cpu.stat"))
		if err != nil {
			return 0, err
		}
		return ParseCPUStatUsage(data)
	}
	if c.Acct.Dir == "" {
		return 0, fmt.Errorf("%w: no cpuacct controller", ErrNoCPUController)
	}
	dir := c.Acct.Dir
	for up := depth(c.CPU.Dir) - depth(l.QuotaDir); up > 0; up-- {
		if dir == c.Acct.Mount {
			break
		}
		dir = path.Dir(dir)
	}
	data, err := fs.ReadFile(c.fsys, path.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, err
	}
	return ParseCPUAcctUsage(data)
}

func depth(p string) int {
	if p == "." {
		return 0
	}
	return strings.Count(p, "/") + 1
}
