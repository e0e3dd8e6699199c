package cgroup

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrMalformed is wrapped by every parse error: the file exists but its
// content is not what the kernel writes. Callers fall back rather than trust
// a half-parsed limit.
var ErrMalformed = errors.New("cgroup: malformed file")

func malformed(file, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrMalformed, file, fmt.Sprintf(format, args...))
}

// clip shortens s for error messages.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}

// parseUint parses a canonical unsigned decimal as the kernel prints it: no
// sign, no leading zeros (except "0" itself), no spaces, at most 19 digits.
func parseUint(s string) (uint64, bool) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// oneLine returns the content of a one-line file without its trailing
// newline, or false when there is more than one line or stray whitespace.
func oneLine(data []byte) (string, bool) {
	s := string(data)
	s = strings.TrimSuffix(s, "\n")
	if strings.ContainsAny(s, "\n\r\t") || strings.TrimSpace(s) != s {
		return "", false
	}
	return s, true
}

// The kernel accepts CFS periods from 1 ms to 1 s and quotas of at least
// 1 ms; the quota's upper bound is large but finite.
const (
	minPeriod = time.Millisecond
	maxPeriod = time.Second
	minQuota  = time.Millisecond
	maxQuota  = 1 << 46 * time.Microsecond // far above any real quota, keeps Cores finite
)

// Quota is a CPU bandwidth limit: Quota of CPU time per Period of wall time.
// Quota < 0 means "no limit" (cgroup v2 "max", cgroup v1 -1).
type Quota struct {
	Quota  time.Duration
	Period time.Duration
}

// Unlimited reports whether q sets no limit.
func (q Quota) Unlimited() bool { return q.Quota < 0 }

// Cores returns the limit in cores (Quota/Period), or +Inf when unlimited.
func (q Quota) Cores() float64 {
	if q.Unlimited() || q.Period <= 0 {
		return math.Inf(1)
	}
	return float64(q.Quota) / float64(q.Period)
}

func (q Quota) check(file string) error {
	if q.Period < minPeriod || q.Period > maxPeriod {
		return malformed(file, "period %v outside the kernel's range [1ms, 1s]", q.Period)
	}
	if !q.Unlimited() && (q.Quota < minQuota || q.Quota > maxQuota) {
		return malformed(file, "quota %v outside the kernel's range", q.Quota)
	}
	return nil
}

// ParseCPUMax parses a cgroup v2 cpu.max file: "<quota> <period>\n" in
// microseconds, quota "max" for no limit. Anything else (extra fields, signs,
// leading zeros, out-of-range values) is an error wrapping ErrMalformed.
func ParseCPUMax(data []byte) (Quota, error) {
	s, ok := oneLine(data)
	if !ok {
		return Quota{}, malformed("cpu.max", "want one line, got %s", clip(string(data)))
	}
	f := strings.Split(s, " ")
	if len(f) != 2 {
		return Quota{}, malformed("cpu.max", "want \"<quota> <period>\", got %s", clip(s))
	}
	p, ok := parseUint(f[1])
	if !ok || p > uint64(maxPeriod/time.Microsecond) {
		return Quota{}, malformed("cpu.max", "bad period %s", clip(f[1]))
	}
	q := Quota{Quota: -1, Period: time.Duration(p) * time.Microsecond}
	if f[0] != "max" {
		n, ok := parseUint(f[0])
		if !ok || n > uint64(maxQuota/time.Microsecond) {
			return Quota{}, malformed("cpu.max", "bad quota %s", clip(f[0]))
		}
		q.Quota = time.Duration(n) * time.Microsecond
	}
	return q, q.check("cpu.max")
}

// FormatCPUMax formats q as the kernel writes cpu.max (without the newline).
func FormatCPUMax(q Quota) string {
	p := strconv.FormatInt(int64(q.Period/time.Microsecond), 10)
	if q.Unlimited() {
		return "max " + p
	}
	return strconv.FormatInt(int64(q.Quota/time.Microsecond), 10) + " " + p
}

// ParseCFS parses the cgroup v1 pair cpu.cfs_quota_us (an integer, -1 for no
// limit) and cpu.cfs_period_us, both in microseconds.
func ParseCFS(quota, period []byte) (Quota, error) {
	ps, ok := oneLine(period)
	p, ok2 := parseUint(ps)
	if !ok || !ok2 || p > uint64(maxPeriod/time.Microsecond) {
		return Quota{}, malformed("cpu.cfs_period_us", "bad period %s", clip(string(period)))
	}
	q := Quota{Quota: -1, Period: time.Duration(p) * time.Microsecond}
	qs, ok := oneLine(quota)
	if !ok {
		return Quota{}, malformed("cpu.cfs_quota_us", "bad quota %s", clip(string(quota)))
	}
	if qs != "-1" {
		n, ok := parseUint(qs)
		if !ok || n > uint64(maxQuota/time.Microsecond) {
			return Quota{}, malformed("cpu.cfs_quota_us", "bad quota %s", clip(qs))
		}
		q.Quota = time.Duration(n) * time.Microsecond
	}
	return q, q.check("cpu.cfs_quota_us")
}

// ParseCPUStatUsage returns usage_usec from a cgroup v2 cpu.stat file
// ("key value" lines). A missing or malformed usage_usec line is an error.
func ParseCPUStatUsage(data []byte) (time.Duration, error) {
	found := false
	var usage time.Duration
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		k, v, ok := strings.Cut(line, " ")
		if !ok || k != "usage_usec" {
			continue
		}
		if found {
			return 0, malformed("cpu.stat", "usage_usec repeated")
		}
		n, ok := parseUint(v)
		if !ok || n > math.MaxInt64/1000 {
			return 0, malformed("cpu.stat", "bad usage_usec %s", clip(v))
		}
		usage, found = time.Duration(n)*time.Microsecond, true
	}
	if !found {
		return 0, malformed("cpu.stat", "no usage_usec line")
	}
	return usage, nil
}

// ParseCPUAcctUsage parses a cgroup v1 cpuacct.usage file: total CPU time in
// nanoseconds.
func ParseCPUAcctUsage(data []byte) (time.Duration, error) {
	s, ok := oneLine(data)
	n, ok2 := parseUint(s)
	if !ok || !ok2 || n > math.MaxInt64 {
		return 0, malformed("cpuacct.usage", "bad usage %s", clip(string(data)))
	}
	return time.Duration(n), nil
}

// maxCPUs bounds CPU numbers in a cpuset list (the kernel's NR_CPUS limit is
// 8192); larger numbers are rejected as malformed.
const maxCPUs = 8192

// ParseCPUSet parses a cpuset list such as "0-3,8,10-11" and returns the
// number of CPUs it names. An empty list is an error (a cpuset with no CPU
// cannot run this process).
func ParseCPUSet(data []byte) (int, error) {
	s, ok := oneLine(data)
	if !ok || s == "" {
		return 0, malformed("cpuset", "bad list %s", clip(string(data)))
	}
	var seen [maxCPUs / 64]uint64
	n := 0
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, ok := parseUint(lo)
		b := a
		if isRange {
			var okHi bool
			b, okHi = parseUint(hi)
			ok = ok && okHi && b >= a
		}
		if !ok || b >= maxCPUs {
			return 0, malformed("cpuset", "bad cpu or range %s", clip(part))
		}
		for c := a; c <= b; c++ {
			if seen[c/64]&(1<<(c%64)) == 0 {
				seen[c/64] |= 1 << (c % 64)
				n++
			}
		}
	}
	return n, nil
}
