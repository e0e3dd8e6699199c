package config

import (
	"fmt"
	"math"
	"reflect"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/pressure"
)

// The signals section must build pressure.Default's set: the same members
// with the same defaults. Most tunables (smoothing, bounds, ratios) are
// not visible on a signal, so the sets are compared by what they do: both
// are fed one synthetic trace on virtual time, through fake readers, and
// every member's readings must agree at every step.

// phase is a stretch of the trace: what the fake readers and the request
// path see during it.
type phase struct {
	dur     time.Duration
	cpu     float64       // CPU utilisation of 2 cores
	rate    float64       // requests per second
	delay   time.Duration // queueing delay before the handler
	service time.Duration // time in the handler
	sched   int           // bucket of the scheduler latencies (see schedBuckets)
	memory  float64       // live heap, fraction of GOMEMLIMIT
	gc      float64       // GC share of the CPU
	files   float64       // open descriptors, fraction of the limit
}

// The trace's phases make each tunable's effect show: the queue target
// learned down onto its floor (many cheap requests) and up onto its
// ceiling (a few costly ones), the latency target at its floor (fast
// handlers) and between its bounds, steps in every limit level for the
// smoothing, the scheduler latency across its target.
var tracePhases = []phase{
	{dur: 3 * time.Second, cpu: 0.3, rate: 2000, delay: 2 * time.Millisecond, service: 300 * time.Microsecond, sched: 1, memory: 0.3, gc: 0.05, files: 0.1},
	{dur: 10 * time.Second, cpu: 0.02, rate: 5000, delay: 200 * time.Microsecond, service: 200 * time.Microsecond, sched: 0, memory: 0.6, gc: 0.2, files: 0.5},
	{dur: 10 * time.Second, cpu: 0.9, rate: 5, delay: 30 * time.Millisecond, service: 400 * time.Millisecond, sched: 2, memory: 0.2, gc: 0.1, files: 0.3},
	{dur: 3 * time.Second, cpu: 0.5, rate: 400, delay: 8 * time.Millisecond, service: 20 * time.Millisecond, sched: 3, memory: 0.9, gc: 0.5, files: 0.9},
}

// schedBuckets are the fake scheduler latency histogram's boundaries.
var schedBuckets = []float64{0, 1e-4, 1e-3, 1e-2, 0.1, 1}

const traceStep = 10 * time.Millisecond

// trace is the virtual process both sets read.
type trace struct {
	elapsed time.Duration
}

// integral returns ∫ f(phase) dt over [0, elapsed], in seconds.
func (tr *trace) integral(f func(phase) float64) float64 {
	var sum float64
	left := tr.elapsed
	for _, p := range tracePhases {
		d := min(left, p.dur)
		sum += f(p) * d.Seconds()
		left -= d
	}
	return sum + f(tracePhases[len(tracePhases)-1])*left.Seconds()
}

func (tr *trace) phase() phase {
	left := tr.elapsed
	for _, p := range tracePhases {
		if left < p.dur {
			return p
		}
		left -= p.dur
	}
	return tracePhases[len(tracePhases)-1]
}

func (tr *trace) duration() time.Duration {
	var d time.Duration
	for _, p := range tracePhases {
		d += p.dur
	}
	return d
}

// readers returns the options that make a set read the trace.
func (tr *trace) readers() []pressure.SetOption {
	const cores = 2
	return []pressure.SetOption{
		pressure.WithCPUOptions(pressure.WithCgroupFS(nil), pressure.WithMaxProcs(func() int { return cores }),
			pressure.WithProcessCPU(func() (time.Duration, error) {
				return time.Duration(tr.integral(func(p phase) float64 { return p.cpu * cores }) * float64(time.Second)), nil
			})),
		pressure.WithSchedOptions(pressure.WithSchedSource(func() *metrics.Float64Histogram {
			h := &metrics.Float64Histogram{Buckets: schedBuckets, Counts: make([]uint64, len(schedBuckets)-1)}
			for b := range h.Counts {
				h.Counts[b] = uint64(tr.integral(func(p phase) float64 {
					if p.sched == b {
						return 1000
					}
					return 0
				}))
			}
			return h
		})),
		pressure.WithMemoryOptions(pressure.WithMemoryCgroupFS(nil), pressure.WithMemoryStats(func() pressure.MemoryStats {
			const limit = 1 << 30
			p := tr.phase()
			return pressure.MemoryStats{Live: uint64(p.memory * limit), NonHeap: 1 << 20, Goal: uint64(p.memory * 2 * limit), GoLimit: limit}
		})),
		pressure.WithGCOptions(pressure.WithGCSource(func() (gc, total float64) {
			return tr.integral(func(p phase) float64 { return p.gc * cores }), tr.elapsed.Seconds() * cores
		})),
		pressure.WithOpenFilesOptions(pressure.WithCountSource(func() (n, limit int64, err error) {
			return int64(tr.phase().files * 1024), 1024, nil
		})),
	}
}

// requests is one set's view of the request path: the requests in its
// handler.
type requests struct {
	set     *pressure.Set
	pending []inHandler
}

type inHandler struct {
	s   pressure.Start
	end time.Time
}

// step starts n requests spread over the step that ends at now, in time
// order with the ends of those before them.
func (r *requests) step(now time.Time, n int, p phase) {
	for i := range n {
		at := now.Add(-traceStep + traceStep*time.Duration(i+1)/time.Duration(n))
		r.endBy(at)
		if r.set.Queue != nil {
			r.set.Queue.Observe(p.delay)
		}
		if r.set.Concurrency != nil {
			r.pending = append(r.pending, inHandler{r.set.Concurrency.StartAt(at, 0), at.Add(p.service)})
		}
	}
	r.endBy(now)
}

// endBy ends the requests due by t, each at its end.
func (r *requests) endBy(t time.Time) {
	kept := r.pending[:0]
	for _, q := range r.pending {
		if q.end.After(t) {
			kept = append(kept, q)
			continue
		}
		r.set.Concurrency.DoneAt(q.s, q.end, 0)
	}
	r.pending = kept
}

// describe returns each member of set as one line: name, target, period
// and latest reading. The goroutine signal reads this test process, which
// other tests change: only its ceiling is compared.
func describe(set *pressure.Set) []string {
	var out []string
	for _, s := range set.Signals() {
		var reading any
		switch m := s.(type) {
		case *pressure.CPU:
			reading = m.Reading()
		case *pressure.SchedLatency:
			reading = m.Reading()
		case *pressure.QueueDelay:
			reading = m.Reading()
		case *pressure.Concurrency:
			reading = m.Reading()
		case *pressure.Memory:
			reading = m.Reading()
		case *pressure.GCCPU:
			reading = m.Reading()
		case *pressure.Count:
			r := m.Reading()
			reading = r
			if m.Name() == "goroutines" {
				reading = fmt.Sprintf("limit %d", r.Limit)
			}
		default:
			reading = fmt.Sprintf("%v", s.Value())
		}
		p, _ := s.(interface{ Period() time.Duration })
		// %+v, not reflect.DeepEqual: NaN readings are equal here.
		out = append(out, fmt.Sprintf("%s target=%v period=%v %+v", s.Name(), s.Target(), p.Period(), reading))
	}
	return out
}

// differ runs the trace through the sets built by got and want, and
// returns the first difference between them ("" when none).
func differ(t *testing.T, got Signals, want ...pressure.SetOption) string {
	t.Helper()
	var tg, tw trace
	gs, err := got.build(tg.readers()...)
	if err != nil {
		t.Fatalf("config's set: %v", err)
	}
	ws, err := pressure.Default(append(want, tw.readers()...)...)
	if err != nil {
		t.Fatalf("pressure.Default: %v", err)
	}
	rg, rw := &requests{set: gs}, &requests{set: ws}
	start := time.Unix(1_000_000, 0)
	var owed float64
	for el := time.Duration(0); el <= tg.duration(); el += traceStep {
		tg.elapsed, tw.elapsed = el, el
		now := start.Add(el)
		p := tg.phase()
		owed += p.rate * traceStep.Seconds()
		n := int(owed)
		owed -= float64(n)
		rg.step(now, n, p)
		rw.step(now, n, p)
		gs.SampleAt(now)
		ws.SampleAt(now)
		// Values and targets at every step, the readings' detail (the
		// expensive part) every tenth.
		if !sameValues(gs, ws) || el%(10*traceStep) == 0 {
			dg, dw := describe(gs), describe(ws)
			if len(dg) != len(dw) {
				return fmt.Sprintf("members %q, want %q", names(gs), names(ws))
			}
			for i := range dg {
				if dg[i] != dw[i] {
					return fmt.Sprintf("at %v:\n got %s\nwant %s", el, dg[i], dw[i])
				}
			}
		}
	}
	return ""
}

// sameValues reports whether the sets' members have the same values and
// targets (NaN equal to NaN).
func sameValues(a, b *pressure.Set) bool {
	sa, sb := a.Signals(), b.Signals()
	if len(sa) != len(sb) {
		return false
	}
	same := func(x, y float64) bool { return x == y || math.IsNaN(x) && math.IsNaN(y) }
	for i := range sa {
		if !same(sa[i].Value(), sb[i].Value()) || !same(sa[i].Target(), sb[i].Target()) {
			return false
		}
	}
	return true
}

func names(set *pressure.Set) []string {
	var out []string
	for _, s := range set.Signals() {
		out = append(out, s.Name())
	}
	return out
}

// TestDefaultsMatchPackages checks that the defaults are the packages'
// own: a service configured by Default behaves as one wired by hand.
// TestDefaultsObservable checks that the comparison sees every field.
func TestDefaultsMatchPackages(t *testing.T) {
	t.Run("signals", func(t *testing.T) {
		if d := differ(t, Default().Signals); d != "" {
			t.Errorf("Default().Signals.Set() differs from pressure.Default(): %s", d)
		}
	})
	t.Run("signals with goroutines", func(t *testing.T) {
		s := Default().Signals
		s.Goroutines.Limit = 1000
		if d := differ(t, s, pressure.WithGoroutineLimit(1000)); d != "" {
			t.Errorf("Signals.Set() with a goroutine limit differs from pressure.Default(WithGoroutineLimit): %s", d)
		}
	})
	t.Run("overload", testOverloadDefaults)
	t.Run("others", testOtherDefaults)
}

// perturbations gives the fields whose generic change (see perturb) the
// trace cannot show, or which the generic change would make invalid, a
// value that is valid and shows.
var perturbations = map[string]any{
	"concurrency.latency_ceiling": 500 * time.Millisecond, // below the trace's 2 × 400ms
}

// perturb changes a field's value: a bool flipped, a number or duration
// scaled by 0.8 (a zero one set to something), unless perturbations says
// otherwise.
func perturb(path string, v reflect.Value) {
	if x, ok := perturbations[path]; ok {
		v.Set(reflect.ValueOf(x))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Float64:
		v.SetFloat(v.Float() * 0.8)
	case reflect.Int:
		v.SetInt(v.Int() * 2)
	case reflect.Int64: // time.Duration
		if v.Int() == 0 {
			v.SetInt(int64(30 * time.Millisecond))
		} else {
			v.SetInt(v.Int() * 8 / 10)
		}
	default:
		panic("perturb: unhandled kind " + v.Kind().String() + " of " + path)
	}
}

// TestDefaultsObservable changes each field of the signals section in
// turn and checks that the comparison of TestDefaultsMatchPackages sees
// the change: a field it could not see would not be checked there.
func TestDefaultsObservable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the trace once per field")
	}
	for _, l := range leaves(Default()) {
		path, ok := strings.CutPrefix(l.path, "signals.")
		if !ok {
			continue
		}
		t.Run(path, func(t *testing.T) {
			cfg := Default()
			cfg.Signals.Goroutines.Limit = 1000
			perturb(path, l.value(cfg))
			if err := cfg.Validate(); err != nil {
				t.Fatalf("the changed value is invalid (add a perturbation): %v", err)
			}
			if d := differ(t, cfg.Signals, pressure.WithGoroutineLimit(1000)); d == "" {
				t.Errorf("changing signals.%s shows no difference from pressure.Default's set", path)
			}
		})
	}
}
