package goodput

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

type cpuSample struct {
	at  time.Time
	cpu float64 // seconds of CPU (user + system) the process has used
}

// cpuTrace samples, from the parent, the CPU time of the backend child the
// loopback harness starts (the child of this process whose environment
// names the backend role), so that no code in the backend is needed.
type cpuTrace struct {
	mu      sync.Mutex
	samples []cpuSample
}

// traceBackend samples every period until ctx is done; the trace is
// complete once done is closed.
func traceBackend(ctx context.Context, period time.Duration) (t *cpuTrace, done <-chan struct{}) {
	t = &cpuTrace{}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		tick := time.NewTicker(period)
		defer tick.Stop()
		pid := 0
		for {
			if pid == 0 {
				pid = findBackend()
			}
			if pid != 0 {
				if cpu, ok := procCPU(pid); ok {
					t.mu.Lock()
					t.samples = append(t.samples, cpuSample{time.Now(), cpu})
					t.mu.Unlock()
				} else {
					pid = 0 // gone
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return t, ch
}

// findBackend returns the pid of this process's backend child, or 0.
func findBackend() int {
	me := os.Getpid()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		f, ok := statFields(pid)
		if !ok || len(f) < 2 || f[1] != strconv.Itoa(me) {
			continue
		}
		env, err := os.ReadFile(filepath.Join(d, "environ"))
		if err == nil && bytes.Contains(env, []byte("\x00LEVEE_LOOPBACK_ROLE=backend\x00")) {
			return pid
		}
	}
	return 0
}

// statFields returns the fields of /proc/<pid>/stat after the command
// name: state, ppid, … (utime and stime are [11] and [12]).
func statFields(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(string(b[i+1:])), true
}

func procCPU(pid int) (float64, bool) {
	f, ok := statFields(pid)
	if !ok || len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(u+s) / clockTicks, true
}

// at returns the CPU seconds used by time x, interpolated between samples;
// ok is false outside the trace.
func (t *cpuTrace) at(x time.Time) (float64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.samples
	for i := 1; i < len(s); i++ {
		if !x.After(s[i].at) {
			if x.Before(s[i-1].at) {
				return 0, false
			}
			span := s[i].at.Sub(s[i-1].at).Seconds()
			if span <= 0 {
				return s[i].cpu, true
			}
			f := x.Sub(s[i-1].at).Seconds() / span
			return s[i-1].cpu + f*(s[i].cpu-s[i-1].cpu), true
		}
	}
	return 0, false
}

// used returns the CPU seconds used in [from, to]; ok is false if the trace
// does not cover it.
func (t *cpuTrace) used(from, to time.Time) (float64, bool) {
	a, ok1 := t.at(from)
	b, ok2 := t.at(to)
	return b - a, ok1 && ok2
}
