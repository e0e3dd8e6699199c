package overload

import (
	"errors"
	"runtime/metrics"
	"sync"
	"syscall"

	"github.com/levee-dev/levee/pressure"
)

// Resources returns the resources of set's memory, GC, goroutine and
// descriptor signals (those that are not nil), with levee's defaults (see
// Memory, GC, Goroutines, OpenFiles). The Manager reads the signals; set
// must be sampled (set.Run) for the readings to move.
func Resources(set *pressure.Set) []Resource {
	var out []Resource
	if set == nil {
		return out
	}
	if set.Memory != nil {
		out = append(out, Memory(set.Memory))
	}
	if set.GC != nil {
		out = append(out, GC(set.GC))
	}
	if set.Goroutines != nil {
		out = append(out, Goroutines(set.Goroutines))
	}
	if set.OpenFiles != nil {
		out = append(out, OpenFiles(set.OpenFiles))
	}
	return out
}

// Memory returns the resource "memory" of m: the fraction of the memory
// limit (GOMEMLIMIT or the cgroup's) in use, in bytes against the limit.
// Thresholds 0.92 (Elevated), 0.95 (High), 0.98 (Critical), margin 0.04;
// requests in flight hold it, Goal 0.9. Its Cycle is the runtime's count
// of garbage collections: the live heap is measured by each collection.
// Without a memory limit the reading is NaN and the resource never
// raises the level.
func Memory(m *pressure.Memory) Resource {
	cycles := gcCycles()
	return MemoryResource(func() Reading {
		r := m.Reading()
		return Reading{Value: r.Value, Used: float64(r.InUse), Limit: float64(r.Limit), Time: r.Time, Cycle: cycles()}
	})
}

// MemoryResource returns the resource "memory" with Memory's thresholds,
// margin and goal over any reading of the fraction of a memory limit in
// use: levee's simulator reads its instances' memory (the requests in
// flight against their memory limit) through it, so that a simulated
// instance refuses work by the rule a real one does.
func MemoryResource(read func() Reading) Resource {
	return Resource{
		Name: "memory", Unit: "bytes",
		Enter: [NumLevels - 1]float64{0.92, 0.95, 0.98}, Margin: 0.04, Goal: 0.9,
		Read: read,
	}
}

// GC returns the resource "gc_cpu" of g: the share of the CPU the garbage
// collector takes. Thresholds 0.4, 0.45, 0.5, margin 0.05: above the
// 0.3 admission control steers to (and that a young process reads for a
// second or two while its first collections run on a tiny heap); past
// GOMEMLIMIT the runtime caps the collector at about half of the CPU, so
// Critical is a process pinned at that cap, and the memory resource
// usually gets there first. It does not steer the requests in flight (a
// collector's share does not scale with them; the memory it collects
// does).
func GC(g *pressure.GCCPU) Resource {
	return Resource{
		Name:  "gc_cpu",
		Enter: [NumLevels - 1]float64{0.4, 0.45, 0.5},
		Read: func() Reading {
			r := g.Reading()
			return Reading{Value: g.Value(), Time: r.Time}
		},
	}
}

// Goroutines returns the resource "goroutines" of c (pressure.NewGoroutines):
// live goroutines against the configured ceiling. Thresholds 0.9, 0.95,
// 0.98, margin 0.04; requests in flight hold it, Goal 0.85.
func Goroutines(c *pressure.Count) Resource {
	return Resource{
		Name: c.Name(), Unit: "goroutines",
		Enter: [NumLevels - 1]float64{0.9, 0.95, 0.98}, Margin: 0.04, Goal: 0.85,
		Read: countReader(c),
	}
}

// OpenFiles returns the resource "open_files" of c (pressure.NewOpenFiles):
// open descriptors against RLIMIT_NOFILE. Thresholds 0.7, 0.85, 0.95,
// margin 0.05: connections hold descriptors, idle ones included, so the
// actions that close connections (keep-alive off, short idle timeouts at
// High) act on it; the requests in flight are not capped for it.
//
// Counting the descriptors takes one (the listing of /proc/self/fd): a
// process out of them cannot count them. A reading that failed with
// EMFILE or ENFILE therefore reads 1, the limit reached, rather than
// nothing.
func OpenFiles(c *pressure.Count) Resource {
	return Resource{
		Name: c.Name(), Unit: "descriptors",
		Enter: [NumLevels - 1]float64{0.7, 0.85, 0.95},
		Read: func() Reading {
			r := c.Reading()
			out := Reading{Value: r.Value, Used: float64(r.Count), Limit: float64(r.Limit), Time: r.Time}
			if errors.Is(r.Err, syscall.EMFILE) || errors.Is(r.Err, syscall.ENFILE) {
				out.Value = 1
			}
			return out
		},
	}
}

func countReader(c *pressure.Count) func() Reading {
	return func() Reading {
		r := c.Reading()
		return Reading{Value: r.Value, Used: float64(r.Count), Limit: float64(r.Limit), Time: r.Time}
	}
}

// gcCycles returns a reader of the number of completed garbage
// collections (runtime/metrics, about 0.3 µs, no allocation).
func gcCycles() func() uint64 {
	var mu sync.Mutex
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	return func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		// Never 0: 0 would mean "every reading is new".
		return s[0].Value.Uint64() + 1
	}
}
