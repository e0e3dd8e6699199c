package proxylab

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Fixed is a backend of known, fixed capacity: Workers requests at a
// time, each held for Hold, the others waiting in arrival order however
// long it takes (a worker pool in front of an unbounded queue, as most
// servers are). Holding costs no CPU, so its capacity, Workers ÷ Hold
// requests per second, does not depend on what else runs on the machine.
// Its health path waits in the same queue as its traffic, as the founding
// text's instances' do: that is how a busy instance comes to be declared
// dead. It never looks at its callers' contexts: a request whose caller
// left is still served (and counted as Gone), work done for nobody.
//
// StatsPath ("/_stats") answers at once, outside the queue, with Stats as
// JSON. Fixed is safe for concurrent use.
type Fixed struct {
	workers chan struct{}
	hold    time.Duration
	start   time.Time

	served, gone atomic.Int64
	mu           sync.Mutex
	perSecond    []int64 // served, by second since start
}

// StatsPath serves a Fixed's Stats.
const StatsPath = "/_stats"

// Stats are a Fixed backend's counters.
type Stats struct {
	// Served requests whose caller was still there; Gone those whose
	// caller had left when they were done.
	Served int64 `json:"served"`
	Gone   int64 `json:"gone"`
	// PerSecond counts Served by second since the backend started.
	PerSecond []int64 `json:"per_second"`
}

// NewFixed returns a Fixed backend; workers < 1 counts as 1; hold 0
// answers at once (a trivial backend).
func NewFixed(workers int, hold time.Duration) *Fixed {
	return &Fixed{workers: make(chan struct{}, max(workers, 1)), hold: hold, start: time.Now()}
}

func (f *Fixed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == StatsPath {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(f.Stats())
		return
	}
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	f.workers <- struct{}{}
	if f.hold > 0 {
		time.Sleep(f.hold)
	}
	<-f.workers
	if r.Context().Err() != nil {
		f.gone.Add(1)
		return
	}
	f.served.Add(1)
	sec := int(time.Since(f.start) / time.Second)
	f.mu.Lock()
	for len(f.perSecond) <= sec {
		f.perSecond = append(f.perSecond, 0)
	}
	f.perSecond[sec]++
	f.mu.Unlock()
	_, _ = io.WriteString(w, "ok\n")
}

// Stats returns the counters.
func (f *Fixed) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Stats{Served: f.served.Load(), Gone: f.gone.Load(), PerSecond: append([]int64(nil), f.perSecond...)}
}
