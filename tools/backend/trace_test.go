package backend

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/pressure"
)

// TestSnapshotTrace checks that each sample writes one JSON line holding
// the controller's snapshot, its time since Start and the process's CPU.
func TestSnapshotTrace(t *testing.T) {
	var buf bytes.Buffer
	start := time.Now()
	srv, err := New(Options{Protection: Levee, Work: Work{Iterations: 10}, Start: start, Horizon: time.Minute, Trace: &buf})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if rec := serve(srv, "127.0.0.1:1", "/work", nil); rec.Code != 200 {
			t.Fatalf("status %d, want 200", rec.Code)
		}
	}
	srv.sample(start.Add(50 * time.Millisecond))
	srv.sample(start.Add(100 * time.Millisecond))
	var lines []TraceLine
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l TraceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (one a sample)", len(lines))
	}
	if !(lines[0].At > 0 && lines[1].At >= lines[0].At) {
		t.Errorf("times %v, %v; want increasing times after Start", lines[0].At, lines[1].At)
	}
	var admitted uint64
	for _, n := range lines[1].Snapshot.Admitted {
		admitted += n
	}
	if admitted != 3 {
		t.Errorf("snapshot admitted %d, want the 3 requests served", admitted)
	}
	if !(lines[1].CPU > 0) {
		t.Errorf("cpu_s = %v, want the process's CPU time", lines[1].CPU)
	}
	if e := srv.Report().TraceErr; e != "" {
		t.Errorf("TraceErr = %q, want none", e)
	}
	if math.IsNaN(pressure.NewSchedLatency().Unread()) {
		t.Error("this runtime does not count the goroutines waiting for a processor: the trace's runnable would read 0")
	}
}

// TestSnapshotTraceWriteFails checks that a failing writer ends the trace
// at its first error, which the Report states.
func TestSnapshotTraceWriteFails(t *testing.T) {
	w := &failWriter{}
	start := time.Now()
	srv, err := New(Options{Protection: Levee, Work: Work{Iterations: 10}, Start: start, Horizon: time.Minute, Trace: w})
	if err != nil {
		t.Fatal(err)
	}
	srv.sample(start.Add(50 * time.Millisecond))
	srv.sample(start.Add(100 * time.Millisecond))
	if w.calls != 1 {
		t.Errorf("%d writes, want 1 (none after the first error)", w.calls)
	}
	if e := srv.Report().TraceErr; !strings.Contains(e, "disk full") {
		t.Errorf("TraceErr = %q, want the write's error", e)
	}
}

type failWriter struct{ calls int }

func (w *failWriter) Write([]byte) (int, error) {
	w.calls++
	return 0, errors.New("disk full")
}
