package backend

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sync"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/pressure"
)

// TraceLine is one line of a Tracer: a sample of the controller's
// snapshot, with the process's CPU time and its threads' wait for a CPU
// in the kernel at the same instant (both cumulative), so that a reader
// can tell a controller starved of its CPU from one that chose to idle,
// and the goroutines ready to run but not running (Go's run queue: on a
// saturated server, mostly connections whose next request has arrived
// and is not read yet).
type TraceLine struct {
	// At is the sample's time since the Tracer's start, in seconds.
	At       float64        `json:"t_s"`
	CPU      float64        `json:"cpu_s"`
	RunDelay float64        `json:"run_delay_s"`
	Runnable uint64         `json:"runnable"`
	Snapshot admit.Snapshot `json:"snapshot"`
}

// Tracer writes a controller's snapshots to a writer as JSON TraceLines,
// one a line: the per-period view a backend's 100 ms maxima hide (a target
// cut and how long it took to come back, a Step that ran late). Both lab
// backends (HTTP here, gRPC in tools/grpclab) write their traces through
// it, so one reader reads both. Safe for concurrent use.
type Tracer struct {
	w     io.Writer
	start time.Time

	mu  sync.Mutex
	err error // the first failed write; none after it
	// waiting reads the goroutines waiting for a processor
	// (pressure.SchedLatency.Unread).
	waiting *pressure.SchedLatency
}

// NewTracer returns a Tracer writing to w, its lines timed from start.
func NewTracer(w io.Writer, start time.Time) *Tracer {
	return &Tracer{w: w, start: start}
}

// Write writes snap as one line, stamped when it is written (a tick's own
// time says when it was due: under load the sampler runs late, and the
// CPU read with it is read when it runs). The first write that fails ends
// the trace; Err reports it. A nil Tracer writes nothing.
func (t *Tracer) Write(snap admit.Snapshot) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return
	}
	line := TraceLine{At: time.Since(t.start).Seconds(), CPU: processCPU().Seconds(), RunDelay: runDelay().Seconds(), Runnable: t.runnable(), Snapshot: snap}
	b, err := json.Marshal(line)
	if err == nil {
		_, err = t.w.Write(append(b, '\n'))
	}
	if err != nil {
		t.err = fmt.Errorf("backend: snapshot trace: %w", err)
	}
}

// Err returns the write error that ended the trace, or nil.
func (t *Tracer) Err() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// runnable returns the goroutines waiting for a processor (0 where the
// runtime does not count them). Called with mu held.
func (t *Tracer) runnable() uint64 {
	if t.waiting == nil {
		t.waiting = pressure.NewSchedLatency()
	}
	n := t.waiting.Unread()
	if math.IsNaN(n) {
		return 0
	}
	return uint64(n)
}
