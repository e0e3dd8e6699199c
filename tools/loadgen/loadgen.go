package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/levee-dev/levee/tools/report"
)

// Phase is a named segment of the offered-load schedule: Rate arrivals per
// second, evenly spaced, for Duration. A Rate of 0 is an idle phase.
type Phase struct {
	Name     string        `json:"name"`
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"duration"`
}

// Outcome is the final outcome of one logical request (all its attempts),
// in the vocabulary of the levee reports.
type Outcome uint8

// The outcomes. Each offered request ends in exactly one of them.
const (
	// Goodput: the request succeeded before its client's deadline.
	Goodput Outcome = iota
	// Rejected: the server (or a proxy) refused it explicitly: a levee
	// 429, 503 or 504, or a levee rejection error other than Throttled.
	Rejected
	// Throttled: the client refused it locally without touching the network.
	Throttled
	// Failed: every other failure: timeouts, resets, plain 5xx, late success.
	Failed
	// GenError: the generator itself failed (too many requests in flight,
	// no local port or file descriptor left). Counted apart: it says nothing
	// about the system under test except that the run is not trustworthy.
	GenError
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"goodput", "rejected", "throttled", "failed", "generator_error"}

// String returns the report name of o: "goodput", "rejected", "throttled",
// "failed" or "generator_error".
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Func performs one logical request scheduled at c.Sched, including any
// retries, and returns its final outcome. It must call c.Attempt once for
// every attempt it puts on the wire, and must return once ctx is done.
// The generator calls it from its own goroutine, concurrently.
type Func func(ctx context.Context, c *Call) Outcome

// Call describes one logical request handed to a Func.
type Call struct {
	// Sched is the time the arrival process scheduled the request at.
	// Latency is measured from it, not from when the request was sent, so
	// a slow generator or a slow connection cannot hide queueing
	// (no coordinated omission).
	Sched time.Time
	// Phase is the index of the phase the request was offered in.
	Phase int

	g *generator
}

// Attempt counts one attempt put on the wire, now. A nil Call ignores it.
func (c *Call) Attempt() {
	if c == nil || c.g == nil {
		return
	}
	c.g.phase[c.Phase].attempted.Add(1)
	c.g.total[attemptedIdx].Add(1)
	c.g.bucketAt(time.Now()).attempted.Add(1)
}

type callKey struct{}

// WithCall returns a copy of ctx carrying c, so that a RoundTripper deep in
// a client stack can count attempts (see CountAttempts).
func WithCall(ctx context.Context, c *Call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

// CallFrom returns the Call carried by ctx, or nil.
func CallFrom(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Config describes a run. The zero value of each optional field means its
// default.
type Config struct {
	// Phases is the offered-load schedule, run back to back. Required.
	Phases []Phase
	// Do performs one logical request. Required.
	Do Func
	// MaxInFlight bounds the logical requests in flight; an arrival beyond
	// it is not sent and counts as a generator error. Default 10000.
	MaxInFlight int
	// Drain is how long the generator waits after the last phase for
	// requests still in flight; then their contexts are cancelled and the
	// requests end as Failed (or whatever Do returns). Default 5s.
	Drain time.Duration
	// Resolution is the width of the buckets of Report.Series. Default 100ms.
	Resolution time.Duration
	// Progress, if set, is called once a second (from a goroutine of the
	// generator, never concurrently with itself) with the last second's
	// figures.
	Progress func(Progress)
}

// Progress is the last second of a run, for a live display. Rates are per
// second over that second: Offered and Attempted by send time, the outcomes
// by completion time.
type Progress struct {
	Elapsed   time.Duration
	Phase     string
	Offered   float64
	Attempted float64
	Goodput   float64
	Rejected  float64
	Throttled float64
	Failed    float64
	InFlight  int64
	// P99 of the latency (from scheduled time) of the successes that
	// completed in that second; 0 if none.
	P99 time.Duration
}

// Report is the result of a run: per phase totals and a time series. It
// marshals to JSON as is.
type Report struct {
	// Start is when the first phase began; Series and phase offsets count
	// from it.
	Start time.Time `json:"start"`
	// Resolution is the width of a Series bucket.
	Resolution time.Duration `json:"resolution"`
	Phases     []PhaseStats  `json:"phases"`
	Series     []Bucket      `json:"series"`
	// GenErrors counts generator errors over the whole run (also in the
	// phases). A run with generator errors overstates the failures.
	GenErrors int64 `json:"generator_errors"`
	// MaxLag is how far behind its schedule the arrival process fell at
	// worst. Latency is measured from the schedule, so lag is part of it.
	MaxLag time.Duration `json:"max_lag"`
	// Cancelled counts requests still in flight when the drain ended.
	Cancelled int64 `json:"cancelled"`
}

// PhaseStats are the totals of the requests offered in one phase, whatever
// the time they completed at.
type PhaseStats struct {
	Name     string        `json:"name"`
	Offset   time.Duration `json:"offset"`
	Duration time.Duration `json:"duration"`
	// Tally counts the outcomes; its Failed leaves out GenErrors.
	report.Tally
	GenErrors int64 `json:"generator_errors"`
	// Latency percentiles of the successful requests, from their scheduled
	// time; 0 if none succeeded.
	P50 time.Duration `json:"p50"`
	P90 time.Duration `json:"p90"`
	P99 time.Duration `json:"p99"`
	Max time.Duration `json:"max"`
}

// Rate returns n per second of the phase's duration (0 for an empty phase).
func (p PhaseStats) Rate(n int64) float64 {
	if p.Duration <= 0 {
		return 0
	}
	return float64(n) / p.Duration.Seconds()
}

// Bucket is one Resolution-wide slice of a run. Offered and the outcomes
// count requests by their scheduled time; Attempted counts attempts by the
// time they were sent; Served counts successes by the time they completed.
type Bucket struct {
	// Tally counts the outcomes; its Failed includes generator errors.
	report.Tally
	Served int64 `json:"served"`
}

// Errors returned by Run for a config it cannot run.
var (
	ErrNoPhases = errors.New("loadgen: no phases")
	ErrNoFunc   = errors.New("loadgen: no request function")
)

const (
	offeredIdx = iota
	attemptedIdx
	totalIdx // outcomes follow, by completion time
)

type counters struct {
	offered, attempted atomic.Int64
	outcome            [numOutcomes]atomic.Int64
}

type bucket struct {
	offered, attempted, served atomic.Int64
	outcome                    [numOutcomes]atomic.Int64
}

type generator struct {
	cfg      Config
	start    time.Time
	res      time.Duration
	phase    []counters
	buckets  []bucket
	total    [totalIdx + int(numOutcomes)]atomic.Int64
	inflight atomic.Int64

	mu        sync.Mutex
	hist      []*hdrhistogram.Histogram // per phase, µs
	interval  *hdrhistogram.Histogram   // successes completed since the last progress
	offsets   []time.Duration
	cancelled atomic.Int64
}

func newHist() *hdrhistogram.Histogram {
	// 1 µs .. 10 min, 3 significant figures.
	return hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), 3)
}

func (g *generator) bucketAt(t time.Time) *bucket {
	i := int(t.Sub(g.start) / g.res)
	if i < 0 {
		i = 0
	}
	if i >= len(g.buckets) {
		i = len(g.buckets) - 1
	}
	return &g.buckets[i]
}

// Run drives cfg's schedule open-loop: each arrival is sent at its scheduled
// time in its own goroutine, whether or not earlier ones have completed. It
// returns when every phase is over and every request has ended, or the
// drain has expired; ctx cancels the run early (the report then covers what
// ran). Run never sends more than the schedule's arrivals.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if len(cfg.Phases) == 0 {
		return nil, ErrNoPhases
	}
	if cfg.Do == nil {
		return nil, ErrNoFunc
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 10000
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 5 * time.Second
	}
	if cfg.Resolution <= 0 {
		cfg.Resolution = 100 * time.Millisecond
	}
	var total time.Duration
	offsets := make([]time.Duration, len(cfg.Phases))
	for i, p := range cfg.Phases {
		if p.Duration <= 0 || p.Rate < 0 {
			return nil, fmt.Errorf("loadgen: phase %d (%q): bad duration %v or rate %v", i, p.Name, p.Duration, p.Rate)
		}
		offsets[i] = total
		total += p.Duration
	}
	g := &generator{
		cfg:     cfg,
		res:     cfg.Resolution,
		phase:   make([]counters, len(cfg.Phases)),
		buckets: make([]bucket, int((total+cfg.Drain)/cfg.Resolution)+2),
		hist:    make([]*hdrhistogram.Histogram, len(cfg.Phases)),
		offsets: offsets,
	}
	for i := range g.hist {
		g.hist[i] = newHist()
	}
	g.interval = newHist()

	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	g.start = time.Now().Add(5 * time.Millisecond)

	progDone := make(chan struct{})
	stopProg := make(chan struct{})
	if cfg.Progress != nil {
		go g.progress(stopProg, progDone)
	} else {
		close(progDone)
	}

	var wg sync.WaitGroup
	maxLag := g.dispatch(ctx, reqCtx, &wg)

	// Drain: wait for the stragglers, then cancel them.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	drain := time.NewTimer(cfg.Drain)
	select {
	case <-done:
	case <-drain.C:
		g.cancelled.Store(g.inflight.Load())
		cancelReqs()
		<-done
	case <-ctx.Done():
		g.cancelled.Store(g.inflight.Load())
		cancelReqs()
		<-done
	}
	drain.Stop()
	close(stopProg)
	<-progDone
	return g.report(maxLag), nil
}

// dispatch runs the arrival process and returns the worst lag.
func (g *generator) dispatch(ctx, reqCtx context.Context, wg *sync.WaitGroup) time.Duration {
	var maxLag time.Duration
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for pi, p := range g.cfg.Phases {
		if p.Rate <= 0 {
			if !sleepUntil(ctx, timer, g.start.Add(g.offsets[pi]+p.Duration)) {
				return maxLag
			}
			continue
		}
		n := int(p.Duration.Seconds() * p.Rate)
		interval := float64(time.Second) / p.Rate
		phaseStart := g.start.Add(g.offsets[pi])
		for i := 0; i < n; i++ {
			sched := phaseStart.Add(time.Duration(float64(i) * interval))
			if d := time.Until(sched); d > 0 {
				if !sleepUntil(ctx, timer, sched) {
					return maxLag
				}
			} else if -d > maxLag {
				maxLag = -d
			}
			if ctx.Err() != nil {
				return maxLag
			}
			g.launch(reqCtx, wg, sched, pi)
		}
		// Hold the phase boundary even if the last arrival came early.
		if !sleepUntil(ctx, timer, g.start.Add(g.offsets[pi]+p.Duration)) {
			return maxLag
		}
	}
	return maxLag
}

func sleepUntil(ctx context.Context, t *time.Timer, when time.Time) bool {
	d := time.Until(when)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t.Reset(d)
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (g *generator) launch(ctx context.Context, wg *sync.WaitGroup, sched time.Time, pi int) {
	g.phase[pi].offered.Add(1)
	g.total[offeredIdx].Add(1)
	b := g.bucketAt(sched)
	b.offered.Add(1)
	if g.inflight.Load() >= int64(g.cfg.MaxInFlight) {
		g.finish(pi, b, GenError, sched, time.Now())
		return
	}
	g.inflight.Add(1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := &Call{Sched: sched, Phase: pi, g: g}
		o := g.cfg.Do(WithCall(ctx, c), c)
		g.inflight.Add(-1)
		g.finish(pi, b, o, sched, time.Now())
	}()
}

func (g *generator) finish(pi int, b *bucket, o Outcome, sched, now time.Time) {
	if o >= numOutcomes {
		o = Failed
	}
	g.phase[pi].outcome[o].Add(1)
	b.outcome[o].Add(1)
	g.total[totalIdx+int(o)].Add(1)
	if o != Goodput {
		return
	}
	g.bucketAt(now).served.Add(1)
	us := int64(now.Sub(sched) / time.Microsecond)
	if us < 1 {
		us = 1
	}
	g.mu.Lock()
	_ = g.hist[pi].RecordValue(us) // out of range values are dropped
	_ = g.interval.RecordValue(us)
	g.mu.Unlock()
}

func (g *generator) progress(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last [totalIdx + int(numOutcomes)]int64
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			var cur [totalIdx + int(numOutcomes)]int64
			for i := range cur {
				cur[i] = g.total[i].Load()
			}
			prev := last
			last = cur
			d := func(i int) float64 { return float64(cur[i] - prev[i]) }
			g.mu.Lock()
			p99 := time.Duration(g.interval.ValueAtQuantile(99)) * time.Microsecond
			g.interval.Reset()
			g.mu.Unlock()
			el := now.Sub(g.start)
			g.cfg.Progress(Progress{
				Elapsed:   el,
				Phase:     g.phaseAt(el),
				Offered:   d(offeredIdx),
				Attempted: d(attemptedIdx),
				Goodput:   d(totalIdx + int(Goodput)),
				Rejected:  d(totalIdx + int(Rejected)),
				Throttled: d(totalIdx + int(Throttled)),
				Failed:    d(totalIdx+int(Failed)) + d(totalIdx+int(GenError)),
				InFlight:  g.inflight.Load(),
				P99:       p99,
			})
		}
	}
}

func (g *generator) phaseAt(el time.Duration) string {
	name := "drain"
	for i, p := range g.cfg.Phases {
		if el >= g.offsets[i] && el < g.offsets[i]+p.Duration {
			return p.Name
		}
	}
	return name
}

func (g *generator) report(maxLag time.Duration) *Report {
	r := &Report{
		Start:      g.start,
		Resolution: g.res,
		MaxLag:     maxLag,
		Cancelled:  g.cancelled.Load(),
		GenErrors:  g.total[totalIdx+int(GenError)].Load(),
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, p := range g.cfg.Phases {
		c := &g.phase[i]
		h := g.hist[i]
		ps := PhaseStats{
			Name:     p.Name,
			Offset:   g.offsets[i],
			Duration: p.Duration,
			Tally: report.Tally{
				Offered:   c.offered.Load(),
				Attempted: c.attempted.Load(),
				Throttled: c.outcome[Throttled].Load(),
				Goodput:   c.outcome[Goodput].Load(),
				Rejected:  c.outcome[Rejected].Load(),
				Failed:    c.outcome[Failed].Load(),
			},
			GenErrors: c.outcome[GenError].Load(),
		}
		if h.TotalCount() > 0 {
			q := func(x float64) time.Duration { return time.Duration(h.ValueAtQuantile(x)) * time.Microsecond }
			ps.P50, ps.P90, ps.P99 = q(50), q(90), q(99)
			ps.Max = time.Duration(h.Max()) * time.Microsecond
		}
		r.Phases = append(r.Phases, ps)
	}
	// Trim the idle tail of the series.
	n := len(g.buckets)
	for n > 0 && g.buckets[n-1].offered.Load() == 0 && g.buckets[n-1].served.Load() == 0 && g.buckets[n-1].attempted.Load() == 0 {
		n--
	}
	r.Series = make([]Bucket, n)
	for i := 0; i < n; i++ {
		b := &g.buckets[i]
		r.Series[i] = Bucket{
			Tally: report.Tally{
				Offered:   b.offered.Load(),
				Attempted: b.attempted.Load(),
				Goodput:   b.outcome[Goodput].Load(),
				Rejected:  b.outcome[Rejected].Load(),
				Throttled: b.outcome[Throttled].Load(),
				Failed:    b.outcome[Failed].Load() + b.outcome[GenError].Load(),
			},
			Served: b.served.Load(),
		}
	}
	return r
}
