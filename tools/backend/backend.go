package backend

import (
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

// Spin does n iterations of a xorshift generator seeded with seed and
// returns the result, so the compiler cannot remove the work. One iteration
// is a few nanoseconds of pure CPU; Calibrate says how many make a
// microsecond on this machine.
func Spin(n int, seed uint64) uint64 {
	x := seed | 1
	for i := 0; i < n; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

// Calibrate measures how many Spin iterations take one microsecond of CPU
// on the calling goroutine's CPU. It takes the fastest of several short
// trials, so that preemption by other processes on a shared machine makes
// it err towards the true speed of an uncontended CPU. It takes about 50ms.
func Calibrate() float64 {
	const n = 200_000
	best := time.Duration(math.MaxInt64)
	var sink uint64
	for i := 0; i < 15; i++ {
		t0 := time.Now()
		sink += Spin(n, uint64(i))
		if d := time.Since(t0); d > 0 && d < best {
			best = d
		}
	}
	if sink == 42 { // keep sink alive
		best++
	}
	return n / (float64(best) / float64(time.Microsecond))
}

// Work is the CPU cost of one request: Iterations of Spin.
type Work struct {
	// Cost is the intended CPU time per request.
	Cost time.Duration
	// Iterations of Spin that take Cost on this machine.
	Iterations int
}

// WorkFor returns the Work of cost: iterations Spins when a parent passes
// the count an earlier backend calibrated (iterations > 0), so that every
// backend of a run does the same work; otherwise NewWork calibrates here.
func WorkFor(cost time.Duration, iterations int) Work {
	if iterations > 0 {
		return Work{Cost: cost, Iterations: iterations}
	}
	return NewWork(cost)
}

// NewWork calibrates the CPU and returns the Work that costs about cost.
func NewWork(cost time.Duration) Work {
	perUS := Calibrate()
	return Work{Cost: cost, Iterations: int(perUS * float64(cost) / float64(time.Microsecond))}
}

// Handler returns the backend's application handler: it burns w's CPU and
// writes a short 200 response. It never sleeps, never waits and never
// looks at its context: it is the CPU-bound service whose queue forms in the
// kernel and the Go run queue (DESIGN.md, "Where the queue really is").
// Each run is counted in s, late if it finishes after the client deadline
// carried in load.DeadlineHeader. s may be nil.
func Handler(w Work, s *Stats) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		x := Spin(w.Iterations, uint64(time.Now().UnixNano()))
		rw.Header().Set("Content-Type", "text/plain")
		var buf [24]byte
		b := strconv.AppendUint(buf[:0], x&0xffff, 10)
		b = append(b, '\n')
		_, _ = rw.Write(b)
		if s != nil {
			s.ran(time.Now(), r.Header.Get(load.DeadlineHeader))
		}
	})
}

// Stats counts what a backend did, in Resolution-wide buckets from Start:
// handler runs (and those finishing after their client's deadline), and
// responses by class as the outermost layer saw them. All methods are safe
// for concurrent use.
type Stats struct {
	start   time.Time
	res     time.Duration
	buckets []statBucket
	// rejections by Levee-Reject reason: overloaded, quota, deadline, other
	reasons [4]atomic.Int64
}

var reasonNames = [4]string{"overloaded", "quota", "deadline", "other"}

type statBucket struct {
	runs, late, ok, okLate, rejected, other atomic.Int64
}

// NewStats returns Stats with buckets of res (default 100ms) covering
// horizon from start; later events land in the last bucket.
func NewStats(start time.Time, res, horizon time.Duration) *Stats {
	if res <= 0 {
		res = 100 * time.Millisecond
	}
	return &Stats{start: start, res: res, buckets: make([]statBucket, int(horizon/res)+1)}
}

func (s *Stats) at(t time.Time) *statBucket {
	i := int(t.Sub(s.start) / s.res)
	if i < 0 {
		i = 0
	}
	if i >= len(s.buckets) {
		i = len(s.buckets) - 1
	}
	return &s.buckets[i]
}

func late(now time.Time, hdr string) bool {
	if hdr == "" {
		return false
	}
	dl, err := strconv.ParseInt(hdr, 10, 64)
	return err == nil && now.UnixNano() > dl
}

func (s *Stats) ran(now time.Time, deadline string) {
	b := s.at(now)
	b.runs.Add(1)
	if late(now, deadline) {
		b.late.Add(1)
	}
}

// Count wraps h (the whole server stack, protection included) and counts
// its responses by status: 2xx (and those written after the client's
// deadline), levee rejections (429/503/504 with Levee-Reject), others.
func (s *Stats) Count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: rw, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		now := time.Now()
		b := s.at(now)
		switch {
		case sw.code >= 200 && sw.code < 300:
			b.ok.Add(1)
			if late(now, r.Header.Get(load.DeadlineHeader)) {
				b.okLate.Add(1)
			}
		case (sw.code == 429 || sw.code == 503 || sw.code == 504) && sw.Header().Get("Levee-Reject") != "":
			b.rejected.Add(1)
			reason := sw.Header().Get("Levee-Reject")
			i := len(s.reasons) - 1
			for k, n := range reasonNames[:3] {
				if len(reason) >= len(n) && reason[:len(n)] == n {
					i = k
				}
			}
			s.reasons[i].Add(1)
		default:
			b.other.Add(1)
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.code, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Series is a JSON-friendly copy of Stats.
type Series struct {
	Start      time.Time     `json:"start"`
	Resolution time.Duration `json:"resolution"`
	// Runs: handler runs completed; Late: of which after the client's
	// deadline (work wasted on a caller that had gone).
	Runs []int64 `json:"runs"`
	Late []int64 `json:"late"`
	// OK: 2xx responses; OKLate: of which after the client's deadline;
	// Rejected: levee rejections; Other: any other status.
	OK       []int64 `json:"ok"`
	OKLate   []int64 `json:"ok_late"`
	Rejected []int64 `json:"rejected"`
	Other    []int64 `json:"other"`
	// RejectedBy totals the rejections by the reason in Levee-Reject
	// (overloaded, quota, deadline, other).
	RejectedBy map[string]int64 `json:"rejected_by,omitempty"`
}

// Snapshot copies the counters, trimmed after the last non-empty bucket.
func (s *Stats) Snapshot() Series {
	n := len(s.buckets)
	for n > 0 {
		b := &s.buckets[n-1]
		if b.runs.Load()+b.ok.Load()+b.rejected.Load()+b.other.Load() != 0 {
			break
		}
		n--
	}
	out := Series{Start: s.start, Resolution: s.res}
	for i, n := range reasonNames {
		if v := s.reasons[i].Load(); v > 0 {
			if out.RejectedBy == nil {
				out.RejectedBy = map[string]int64{}
			}
			out.RejectedBy[n] = v
		}
	}
	for i := 0; i < n; i++ {
		b := &s.buckets[i]
		out.Runs = append(out.Runs, b.runs.Load())
		out.Late = append(out.Late, b.late.Load())
		out.OK = append(out.OK, b.ok.Load())
		out.OKLate = append(out.OKLate, b.okLate.Load())
		out.Rejected = append(out.Rejected, b.rejected.Load())
		out.Other = append(out.Other, b.other.Load())
	}
	return out
}
