package cgroup

import (
	"strconv"
	"strings"
)

// Entry is one line of /proc/<pid>/cgroup: "ID:controllers:path".
// For the cgroup v2 (unified) hierarchy ID is 0 and Controllers is empty.
type Entry struct {
	ID          int
	Controllers []string
	Path        string
}

// ParseProcCgroup parses /proc/<pid>/cgroup. Blank lines are skipped; a line
// without two colons, with a non-numeric ID or a path not starting with "/"
// is an error wrapping ErrMalformed.
func ParseProcCgroup(data []byte) ([]Entry, error) {
	var out []Entry
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		id, rest, ok1 := strings.Cut(line, ":")
		ctl, p, ok2 := strings.Cut(rest, ":")
		n, err := strconv.Atoi(id)
		if !ok1 || !ok2 || err != nil || n < 0 || !strings.HasPrefix(p, "/") {
			return nil, malformed("/proc/self/cgroup", "bad line %s", clip(line))
		}
		e := Entry{ID: n, Path: p}
		if ctl != "" {
			e.Controllers = strings.Split(ctl, ",")
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, malformed("/proc/self/cgroup", "no entries")
	}
	return out, nil
}

// Mount is the part of a /proc/<pid>/mountinfo line that locates a cgroup
// hierarchy: Root is the path inside the filesystem that is mounted at
// MountPoint; SuperOptions lists the controllers for cgroup v1.
type Mount struct {
	Root         string
	MountPoint   string
	FSType       string
	SuperOptions []string
}

// ParseMountInfo parses /proc/<pid>/mountinfo (proc(5)): fields 4 and 5 are
// root and mount point, then optional fields up to "-", then filesystem type,
// source and super options. Octal escapes (\040 for a space) are decoded. A
// line with too few fields or no "-" separator is an error wrapping
// ErrMalformed.
func ParseMountInfo(data []byte) ([]Mount, error) {
	var out []Mount
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 10 || sep < 0 || len(f) < sep+4 {
			return nil, malformed("/proc/self/mountinfo", "bad line %s", clip(line))
		}
		root, ok1 := unescape(f[3])
		mp, ok2 := unescape(f[4])
		if !ok1 || !ok2 || !strings.HasPrefix(root, "/") || !strings.HasPrefix(mp, "/") {
			return nil, malformed("/proc/self/mountinfo", "bad path in %s", clip(line))
		}
		out = append(out, Mount{
			Root:         root,
			MountPoint:   mp,
			FSType:       f[sep+1],
			SuperOptions: strings.Split(f[sep+3], ","),
		})
	}
	if len(out) == 0 {
		return nil, malformed("/proc/self/mountinfo", "no mounts")
	}
	return out, nil
}

// unescape decodes the kernel's \ooo octal escapes.
func unescape(s string) (string, bool) {
	if !strings.Contains(s, `\`) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), true
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
