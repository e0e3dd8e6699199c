package pressure

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"time"
)

// errSchedstat is wrapped by parseSchedstat errors.
var errSchedstat = errors.New("pressure: malformed schedstat")

// parseSchedstat parses /proc/<pid>/task/<tid>/schedstat: "<cpu ns>
// <run-queue wait ns> <timeslices>\n" and returns the wait.
func parseSchedstat(data []byte) (time.Duration, error) {
	s := strings.TrimSuffix(string(data), "\n")
	f := strings.Split(s, " ")
	if len(f) != 3 {
		return 0, fmt.Errorf("%w: %q", errSchedstat, clipString(s))
	}
	var n [3]int64
	for i, x := range f {
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil || strings.Trim(x, "0123456789") != "" || len(x) > 1 && x[0] == '0' {
			return 0, fmt.Errorf("%w: field %d %q", errSchedstat, i+1, clipString(x))
		}
		n[i] = v
	}
	return time.Duration(n[1]), nil
}

func clipString(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// runQueueWait sums, over this process's threads, the time they spent
// runnable in the kernel's run queue without a CPU. Threads come and go:
// it remembers each thread's last value and returns a cumulative total
// that never goes backwards.
type runQueueWait struct {
	fsys  fs.FS
	last  map[string]time.Duration
	seen  map[string]time.Duration
	total time.Duration
}

func newRunQueueWait(fsys fs.FS) *runQueueWait {
	return &runQueueWait{fsys: fsys, last: map[string]time.Duration{}, seen: map[string]time.Duration{}}
}

func (w *runQueueWait) read() (time.Duration, error) {
	const dir = "proc/self/task"
	tasks, err := fs.ReadDir(w.fsys, dir)
	if err != nil {
		return 0, err
	}
	clear(w.seen)
	for _, t := range tasks {
		data, err := fs.ReadFile(w.fsys, path.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited between the listing and the read
		}
		d, err := parseSchedstat(data)
		if err != nil {
			return 0, err
		}
		w.seen[t.Name()] = d
		if prev, ok := w.last[t.Name()]; ok && d >= prev {
			w.total += d - prev
		} else if !ok {
			w.total += d
		}
	}
	w.last, w.seen = w.seen, w.last
	return w.total, nil
}
