package backend

import (
	"context"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// Protection names the server stacks the demo compares.
const (
	// None: the application handler alone, as most Go services run.
	None = "none"
	// Levee: leveehttp.NewHandler with an admit.Controller fed by the
	// default pressure signals, all defaults.
	Levee = "levee"
)

// Options configure a Server.
type Options struct {
	// Protection is None or Levee.
	Protection string
	// Work is the CPU cost of one request.
	Work Work
	// Start and Horizon bound the Stats time series (100ms buckets).
	Start   time.Time
	Horizon time.Duration
	// Extra names further protections: a Protection found here puts the
	// application handler behind its Wrap.
	Extra map[string]Wrap
	// Levee sets up the Levee protection beyond its defaults.
	Levee LeveeOptions
	// Trace, if set (Levee protection only), receives the controller's
	// snapshot every 50 ms as one JSON TraceLine a line (see Tracer).
	Trace io.Writer
}

// Server is the backend service: the application handler, optionally
// behind levee, with its counters.
type Server struct {
	// Handler serves every request (the protection and the counters
	// included).
	Handler http.Handler
	// Stats counts handler runs and responses.
	Stats *Stats

	opts        Options
	ctrl        *admit.Controller
	loops       []func(context.Context)
	listen      func(net.Listener) net.Listener
	gone        interface{ Gone() uint64 } // the listener's count of connections closed unread, nil when none; under mu
	connContext connContextFunc

	mu     sync.Mutex
	shedBy map[string]time.Duration
	levels []float64 // max shed level per Stats bucket
	loads  []float64 // max load per Stats bucket
	admitF []float64 // min admit fraction per Stats bucket
	capRPS []float64 // last capacity estimate per Stats bucket
	runB   []float64 // max run-queue bound per Stats bucket
	runW   []float64 // max run-queue waiters per Stats bucket
	sigs   map[string][]float64

	stalled, maxStall time.Duration

	errs *ErrorLog

	tracer *Tracer // Options.Trace; nil when none
}

// New builds a Server. Call Run to start its control loops.
func New(o Options) (*Server, error) {
	s := &Server{
		opts:   o,
		Stats:  NewStats(o.Start, 100*time.Millisecond, o.Horizon),
		shedBy: map[string]time.Duration{},
		errs:   NewErrorLog(os.Stderr),
	}
	if o.Trace != nil {
		s.tracer = NewTracer(o.Trace, o.Start)
	}
	s.levels = make([]float64, len(s.Stats.buckets))
	s.loads = make([]float64, len(s.Stats.buckets))
	s.admitF = make([]float64, len(s.Stats.buckets))
	for i := range s.admitF {
		s.admitF[i] = 1
	}
	s.capRPS = make([]float64, len(s.Stats.buckets))
	s.runB = make([]float64, len(s.Stats.buckets))
	s.runW = make([]float64, len(s.Stats.buckets))
	s.sigs = map[string][]float64{}
	app := Handler(o.Work, s.Stats)
	switch o.Protection {
	case None, "":
		s.Handler = s.Stats.Count(app)
	case Levee:
		h, err := s.protect(app)
		if err != nil {
			return nil, err
		}
		s.Handler = s.opts.Levee.mount(s.Stats.Count(h), s.ctrl)
	default:
		w, ok := o.Extra[o.Protection]
		if !ok || w == nil {
			return nil, fmt.Errorf("backend: unknown protection %q", o.Protection)
		}
		s.Handler = s.Stats.Count(w(app))
	}
	return s, nil
}

// ErrorLog returns the logger for http.Server.ErrorLog: net/http's
// messages, handler panics among them, counted in the Report and copied
// (panics all, other kinds a few each) to the process's stderr.
func (s *Server) ErrorLog() *log.Logger { return s.errs.Logger() }

// Run runs the server's control loops (signals, admission controller, and
// the tracker that records which signal drove shedding) until ctx is done.
func (s *Server) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, f := range s.loops {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	if s.ctrl != nil {
		wg.Add(1)
		go func() { defer wg.Done(); s.track(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); s.watch(ctx) }()
	wg.Wait()
}

// watch measures how long the process went without running a timer's
// goroutine. Two causes, told apart by Report.RunDelay: other work on the
// machine keeping the pinned process off its CPU, and, in a saturated
// GOMAXPROCS=1 process, the Go run queue itself: measured here, a plain
// net/http server with 20ms CPU-bound handlers at 4× its capacity ran a
// 50ms ticker's goroutine once in 21s. Control loops driven only by a
// ticker freeze exactly when they are needed.
func (s *Server) watch(ctx context.Context) {
	t := time.NewTicker(trackPeriod)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			gap := now.Sub(last)
			last = now
			if gap > 3*trackPeriod {
				s.mu.Lock()
				s.stalled += gap - trackPeriod
				s.maxStall = max(s.maxStall, gap)
				s.mu.Unlock()
			}
		}
	}
}

const trackPeriod = 50 * time.Millisecond

// track samples the controller's snapshot every trackPeriod.
func (s *Server) track(ctx context.Context) {
	t := time.NewTicker(trackPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

// sample takes one sample of the controller's snapshot at now: the per
// bucket maxima of the Report, the time spent shedding charged to the
// signal furthest above its target, and a line of Options.Trace.
func (s *Server) sample(now time.Time) {
	snap := s.ctrl.Snapshot()
	s.tracer.Write(snap)
	snap.ShedLevel, snap.Load = finite(snap.ShedLevel, 0), finite(snap.Load, 0)
	snap.AdmitFraction, snap.CapacityRPS = finite(snap.AdmitFraction, 1), finite(snap.CapacityRPS, 0)
	i := int(now.Sub(s.opts.Start) / s.Stats.res)
	if i < 0 || i >= len(s.levels) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.levels[i] = max(s.levels[i], snap.ShedLevel)
	s.loads[i] = max(s.loads[i], snap.Load)
	s.admitF[i] = min(s.admitF[i], snap.AdmitFraction)
	s.capRPS[i] = snap.CapacityRPS
	s.runB[i] = max(s.runB[i], float64(snap.RunBound))
	s.runW[i] = max(s.runW[i], float64(snap.Waiting))
	MaxSignals(s.sigs, len(s.levels), i, snap.Signals)
	if snap.ShedLevel > 0 {
		name, best := "", -1.0
		for _, sig := range snap.Signals {
			if r := finite(sig.Value/sig.Target, 0); sig.Target > 0 && r > best {
				name, best = sig.Name, r
			}
		}
		if name == "" {
			name = "unknown"
		}
		s.shedBy[name] += trackPeriod
	}
}

// finite returns x, or def if x is NaN or infinite (JSON has neither).
// MaxSignals raises bucket i of each signal's series in into (n buckets,
// made when the signal is first seen) to the signal's value ÷ target, if
// higher: the per-bucket maxima the labs' backends report.
func MaxSignals(into map[string][]float64, n, i int, sigs []admit.SignalState) {
	for _, sig := range sigs {
		v := into[sig.Name]
		if v == nil {
			v = make([]float64, n)
			into[sig.Name] = v
		}
		if sig.Target > 0 && i >= 0 && i < len(v) {
			v[i] = max(v[i], finite(sig.Value/sig.Target, 0))
		}
	}
}

func finite(x, def float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return def
	}
	return x
}

// Report is what a backend tells the harness at the end of a run.
type Report struct {
	Protection string `json:"protection"`
	Work       Work   `json:"work"`
	Series     Series `json:"series"`
	// ShedLevel and Load are the maxima per Series bucket of the
	// controller's shed level and load (levee only).
	ShedLevel []float64 `json:"shed_level,omitempty"`
	Load      []float64 `json:"load,omitempty"`
	// AdmitFraction (minimum), CapacityRPS (the controller's estimate) and
	// each signal's value ÷ target (maximum) per Series bucket (levee only).
	AdmitFraction []float64 `json:"admit_fraction,omitempty"`
	CapacityRPS   []float64 `json:"capacity_rps,omitempty"`
	// RunBound and RunWaiting are the maxima per Series bucket of the run
	// queue's bound (0: off or not learned) and of the requests waiting in
	// it (levee only).
	RunBound   []float64            `json:"run_bound,omitempty"`
	RunWaiting []float64            `json:"run_waiting,omitempty"`
	Signals    map[string][]float64 `json:"signals,omitempty"`
	// ShedBy charges the time spent shedding to the signal that was the
	// furthest above its target, in seconds.
	ShedBy map[string]float64 `json:"shed_by,omitempty"`
	// Stalled is the total time the process ran no timer goroutine for
	// more than 150ms in a row (the process off its CPU, or the timer's
	// goroutine queued behind runnable handlers), MaxStall the longest
	// such stretch.
	Stalled  time.Duration `json:"stalled"`
	MaxStall time.Duration `json:"max_stall"`
	// CPU is the CPU time the process used (user + system) up to Report.
	CPU time.Duration `json:"cpu"`
	// RunDelay is the time the process's live threads spent runnable but
	// waiting for a CPU in the kernel (schedstat): the share of the machine
	// taken by other work.
	RunDelay time.Duration `json:"run_delay"`
	// Admitted and Rejected are the controller's cumulative counters;
	// AdmittedBy splits Admitted by the criticality the controller saw
	// (an untrusted caller's capped at CRITICAL).
	Admitted   uint64            `json:"admitted"`
	Rejected   uint64            `json:"rejected"`
	AdmittedBy map[string]uint64 `json:"admitted_by,omitempty"`
	// Panics counts the handler panics net/http recovered and logged to
	// ErrorLog; ServerErrors counts everything it logged there by kind.
	Panics       int64            `json:"panics"`
	ServerErrors map[string]int64 `json:"server_errors,omitempty"`
	// ConnsGone counts the connections the listener closed unread at
	// their accept, their peer gone (leveehttp.Listener; levee only).
	ConnsGone uint64 `json:"conns_gone,omitempty"`
	// TraceErr is why the snapshot trace (Options.Trace) stopped early.
	TraceErr string `json:"trace_err,omitempty"`
}

// Report returns the server's counters so far.
func (s *Server) Report() Report {
	r := Report{Protection: s.opts.Protection, Work: s.opts.Work, Series: s.Stats.Snapshot(),
		Panics: s.errs.Panics(), ServerErrors: s.errs.Kinds()}
	s.mu.Lock()
	r.Stalled, r.MaxStall = s.stalled, s.maxStall
	s.mu.Unlock()
	r.CPU = processCPU()
	r.RunDelay = runDelay()
	if err := s.tracer.Err(); err != nil {
		r.TraceErr = err.Error()
	}
	s.mu.Lock()
	if s.gone != nil {
		r.ConnsGone = s.gone.Gone()
	}
	s.mu.Unlock()
	if s.ctrl == nil {
		return r
	}
	n := len(r.Series.Runs)
	s.mu.Lock()
	r.ShedLevel = append([]float64(nil), s.levels[:n]...)
	r.Load = append([]float64(nil), s.loads[:n]...)
	r.AdmitFraction = append([]float64(nil), s.admitF[:n]...)
	r.CapacityRPS = append([]float64(nil), s.capRPS[:n]...)
	r.RunBound = append([]float64(nil), s.runB[:n]...)
	r.RunWaiting = append([]float64(nil), s.runW[:n]...)
	r.Signals = map[string][]float64{}
	for k, v := range s.sigs {
		r.Signals[k] = append([]float64(nil), v[:n]...)
	}
	r.ShedBy = map[string]float64{}
	for k, v := range s.shedBy {
		r.ShedBy[k] = v.Seconds()
	}
	s.mu.Unlock()
	snap := s.ctrl.Snapshot()
	r.AdmittedBy = map[string]uint64{}
	for c := range snap.Admitted {
		r.Admitted += snap.Admitted[c]
		if snap.Admitted[c] > 0 {
			r.AdmittedBy[levee.Criticality(c).String()] = snap.Admitted[c]
		}
		for _, v := range snap.Rejected[c] {
			r.Rejected += v
		}
	}
	return r
}

// Dominant returns the signal that drove most of the shedding in shedBy
// and its share of the shedding time; "" if nothing was shed.
func Dominant(shedBy map[string]float64) (string, float64) {
	var total float64
	names := make([]string, 0, len(shedBy))
	for k, v := range shedBy {
		total += v
		names = append(names, k)
	}
	sort.Strings(names)
	best, bv := "", 0.0
	for _, k := range names {
		if shedBy[k] > bv {
			best, bv = k, shedBy[k]
		}
	}
	if total == 0 {
		return "", 0
	}
	return best, bv / total
}

// processCPU is the CPU time this process used (user + system), 0 where
// getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runDelay sums the kernel's run-queue wait over the process's threads
// (second field of /proc/self/task/*/schedstat, in nanoseconds); 0 where
// schedstat is not available.
func runDelay() time.Duration {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue
		}
		if v, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			total += v
		}
	}
	return time.Duration(total)
}
