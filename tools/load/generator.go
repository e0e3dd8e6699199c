package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/levee-dev/levee"
)

// Outcome is the final outcome of one logical request (all its attempts),
// in the vocabulary of levee's reports.
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
	// Failed: every other failure: timeouts, resets, plain 5xx, late
	// success. Call.Failure says which.
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

// Failure classifies a Failed outcome.
type Failure uint8

// The classes of failure, the keys of report.Phase.FailedBy.
const (
	OtherFailure Failure = iota // anything else
	Timeout                     // the client's deadline passed
	Reset                       // the connection was reset or closed
	Refused                     // nothing listened
	Status5xx                   // a 5xx that is not a levee rejection
	Status4xx                   // a 4xx that is not a levee rejection
	Cancelled                   // the run was stopped with the request in flight
	numFailures
)

var failureNames = [numFailures]string{"other", "timeout", "reset", "refused", "status_5xx", "status_4xx", "cancelled"}

// String returns the report name of f.
func (f Failure) String() string {
	if f < numFailures {
		return failureNames[f]
	}
	return fmt.Sprintf("Failure(%d)", int(f))
}

// generatorFailure is the FailedBy key of generator errors.
const generatorFailure = "generator"

// Func performs one logical request scheduled at c.Sched, including any
// retries, and returns its final outcome; for Failed it sets c.Failure.
// It must call c.Attempt once for every attempt it puts on the wire, and
// must return once ctx is done. The generator calls it from a goroutine of
// its own, concurrently.
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
	// Criticality and Tenant are the request's, from the run's Mix
	// (Tenant "" without tenants).
	Criticality levee.Criticality
	Tenant      string
	// Failure is set by the Func when it returns Failed.
	Failure Failure

	g      *generator
	ci, ti int // class indexes: criticality in the mix, tenant or -1
}

// Attempt counts one attempt put on the wire, now. A nil Call ignores it.
func (c *Call) Attempt() {
	if c == nil || c.g == nil {
		return
	}
	g := c.g
	ph := &g.phases[c.Phase]
	ph.all.attempted.Add(1)
	ph.crit[c.ci].attempted.Add(1)
	if c.ti >= 0 {
		ph.tenant[c.ti].attempted.Add(1)
	}
	g.total[attemptedIdx].Add(1)
	g.bucketAt(time.Now()).attempted.Add(1)
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
	// Mix assigns criticalities and tenants to the arrivals.
	Mix Mix
	// Limits are the hard caps the schedule must respect.
	Limits Limits
	// MaxInFlight bounds the logical requests in flight; an arrival beyond
	// it is not sent and counts as a generator error. Default 10000.
	MaxInFlight int
	// Drain is how long the generator waits after the last phase for
	// requests still in flight; then their contexts are cancelled and the
	// requests end as Failed (or whatever Do returns). Default 5s.
	Drain time.Duration
	// Grace is how long requests in flight may still complete once ctx is
	// cancelled (a stopped run); then they are cancelled. Default 1s.
	Grace time.Duration
	// Resolution is the width of the buckets of Result.Series. Default 100ms.
	Resolution time.Duration
	// Progress, if set, is called once a second (from a goroutine of the
	// generator, never concurrently with itself) with the last second's
	// figures.
	Progress func(Progress)
}

// Errors returned by Run for a config it cannot run.
var (
	ErrNoPhases = errors.New("load: no phases")
	ErrNoFunc   = errors.New("load: no request function")
)

// classCounters count the requests of one class (all, one criticality,
// one tenant) in one phase.
type classCounters struct {
	offered, attempted atomic.Int64
	outcome            [numOutcomes]atomic.Int64
}

type phaseCounters struct {
	all     classCounters
	crit    []classCounters // by index in the compiled mix
	tenant  []classCounters
	failure [numFailures]atomic.Int64
}

type bucket struct {
	offered, attempted, served atomic.Int64
	outcome                    [numOutcomes]atomic.Int64
	p99                        time.Duration // written under generator.mu
}

const (
	offeredIdx = iota
	attemptedIdx
	totalIdx // outcomes follow, by completion time
)

type generator struct {
	cfg      Config
	mix      compiled
	start    time.Time
	res      time.Duration
	offsets  []time.Duration
	phases   []phaseCounters
	buckets  []bucket
	total    [totalIdx + int(numOutcomes)]atomic.Int64
	failures [numFailures]atomic.Int64
	inflight atomic.Int64
	arrivals int64 // arrival index, dispatcher only

	mu        sync.Mutex
	hist      []*hdrhistogram.Histogram // per phase, µs, successes
	interval  *hdrhistogram.Histogram   // successes completed since the last progress
	bhist     *hdrhistogram.Histogram   // successes completed in bucket bhistAt
	bhistAt   int
	cancelled atomic.Int64
}

func newHist(sigFigs int) *hdrhistogram.Histogram {
	// 1 µs .. 10 min.
	return hdrhistogram.New(1, int64(10*time.Minute/time.Microsecond), sigFigs)
}

func (g *generator) bucketIndex(t time.Time) int {
	return min(max(int(t.Sub(g.start)/g.res), 0), len(g.buckets)-1)
}

func (g *generator) bucketAt(t time.Time) *bucket { return &g.buckets[g.bucketIndex(t)] }

// Run drives cfg's schedule open-loop: each arrival is sent at its scheduled
// time in its own goroutine, whether or not earlier ones have completed. It
// returns when every phase is over and every request has ended, or the
// drain has expired. Cancelling ctx stops the run: no new arrivals, the
// requests in flight get cfg.Grace to complete, and the Result covers what
// ran (Result.Stopped). Run never sends more than the schedule's
// arrivals.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	total, err := check(cfg.Phases, cfg.Limits)
	if err != nil {
		return nil, err
	}
	if cfg.Do == nil {
		return nil, ErrNoFunc
	}
	mix, err := cfg.Mix.compile()
	if err != nil {
		return nil, err
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 10000
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 5 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = time.Second
	}
	if cfg.Resolution <= 0 {
		cfg.Resolution = 100 * time.Millisecond
	}
	g := &generator{
		cfg:      cfg,
		mix:      mix,
		res:      cfg.Resolution,
		offsets:  make([]time.Duration, len(cfg.Phases)),
		phases:   make([]phaseCounters, len(cfg.Phases)),
		buckets:  make([]bucket, int((total+cfg.Drain+cfg.Grace)/cfg.Resolution)+2),
		hist:     make([]*hdrhistogram.Histogram, len(cfg.Phases)),
		interval: newHist(2),
		bhist:    newHist(2),
	}
	var off time.Duration
	for i, p := range cfg.Phases {
		g.offsets[i] = off
		off += p.Duration
		g.hist[i] = newHist(3)
		g.phases[i].crit = make([]classCounters, len(mix.crits))
		g.phases[i].tenant = make([]classCounters, len(mix.tenants))
	}

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
	stoppedAt := time.Since(g.start)
	stopped := ctx.Err() != nil

	// Drain (or, stopped, the grace period), then cancel the stragglers.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	wait := cfg.Drain
	if stopped {
		wait = cfg.Grace
	}
	timer := time.NewTimer(wait)
	var stop <-chan struct{}
	if !stopped {
		stop = ctx.Done()
	}
	select {
	case <-done:
	case <-timer.C:
		g.cancelled.Store(g.inflight.Load())
		cancelReqs()
		<-done
	case <-stop:
		// Stopped during the drain: the schedule ran whole; give the
		// stragglers the grace period only.
		select {
		case <-done:
		case <-time.After(cfg.Grace):
			g.cancelled.Store(g.inflight.Load())
			cancelReqs()
			<-done
		}
	}
	timer.Stop()
	close(stopProg)
	<-progDone
	if !stopped {
		stoppedAt = total
	}
	return g.result(maxLag, stopped, stoppedAt), nil
}

// dispatch runs the arrival process and returns the worst lag.
func (g *generator) dispatch(ctx, reqCtx context.Context, wg *sync.WaitGroup) time.Duration {
	var maxLag time.Duration
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for pi, p := range g.cfg.Phases {
		phaseStart := g.start.Add(g.offsets[pi])
		n := p.arrivals()
		for i := 0; i < n; i++ {
			sched := phaseStart.Add(p.at(i))
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
		if !sleepUntil(ctx, timer, phaseStart.Add(p.Duration)) {
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
	ci, ti := g.mix.assign(g.arrivals)
	g.arrivals++
	c := &Call{Sched: sched, Phase: pi, Criticality: g.mix.crits[ci], g: g, ci: ci, ti: ti}
	if ti >= 0 {
		c.Tenant = g.mix.tenants[ti]
	}
	ph := &g.phases[pi]
	ph.all.offered.Add(1)
	ph.crit[ci].offered.Add(1)
	if ti >= 0 {
		ph.tenant[ti].offered.Add(1)
	}
	g.total[offeredIdx].Add(1)
	b := g.bucketAt(sched)
	b.offered.Add(1)
	if g.inflight.Load() >= int64(g.cfg.MaxInFlight) {
		g.finish(c, b, GenError, time.Now())
		return
	}
	g.inflight.Add(1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		o := g.cfg.Do(WithCall(ctx, c), c)
		if o == Failed && ctx.Err() != nil && c.Failure == OtherFailure {
			c.Failure = Cancelled
		}
		g.inflight.Add(-1)
		g.finish(c, b, o, time.Now())
	}()
}

func (g *generator) finish(c *Call, b *bucket, o Outcome, now time.Time) {
	if o >= numOutcomes {
		o = Failed
	}
	ph := &g.phases[c.Phase]
	ph.all.outcome[o].Add(1)
	ph.crit[c.ci].outcome[o].Add(1)
	if c.ti >= 0 {
		ph.tenant[c.ti].outcome[o].Add(1)
	}
	b.outcome[o].Add(1)
	g.total[totalIdx+int(o)].Add(1)
	if o == Failed {
		f := min(c.Failure, numFailures-1)
		ph.failure[f].Add(1)
		g.failures[f].Add(1)
	}
	if o != Goodput {
		return
	}
	bi := g.bucketIndex(now)
	g.buckets[bi].served.Add(1)
	us := max(int64(now.Sub(c.Sched)/time.Microsecond), 1)
	g.mu.Lock()
	_ = g.hist[c.Phase].RecordValue(us) // out of range values are dropped
	_ = g.interval.RecordValue(us)
	if bi != g.bhistAt {
		g.flushBucketLocked()
		g.bhistAt = bi
	}
	_ = g.bhist.RecordValue(us)
	g.mu.Unlock()
}

// flushBucketLocked stores the p99 of the bucket histogram in its bucket
// and resets it. g.mu is held.
func (g *generator) flushBucketLocked() {
	if g.bhist.TotalCount() > 0 {
		b := &g.buckets[g.bhistAt]
		b.p99 = max(b.p99, time.Duration(g.bhist.ValueAtQuantile(99))*time.Microsecond)
		g.bhist.Reset()
	}
}

// Progress is the last second of a run, for a live display. Rates are per
// second over that second: Offered and Attempted by send time, the outcomes
// by completion time.
type Progress struct {
	Elapsed   time.Duration `json:"elapsed"`
	Phase     string        `json:"phase"`
	Offered   float64       `json:"offered"`
	Attempted float64       `json:"attempted"`
	Goodput   float64       `json:"goodput"`
	Rejected  float64       `json:"rejected"`
	Throttled float64       `json:"throttled"`
	// Failed counts failures and generator errors; FailedBy splits them
	// by class (report.Phase.FailedBy's keys), for the classes seen.
	Failed   float64            `json:"failed"`
	FailedBy map[string]float64 `json:"failed_by,omitempty"`
	InFlight int64              `json:"in_flight"`
	// P50 and P99 of the latency (from scheduled time) of the successes
	// that completed in that second; 0 if none.
	P50 time.Duration `json:"p50"`
	P99 time.Duration `json:"p99"`
}

// String returns the live progress line: time, phase, rates, latency and
// failures by class.
func (p Progress) String() string {
	s := fmt.Sprintf("%5.1fs %-10s offered %6.0f/s  attempted %6.0f/s  goodput %6.0f/s  rejected %5.0f/s  throttled %5.0f/s  p50 %s  p99 %s  in flight %d",
		p.Elapsed.Seconds(), p.Phase, p.Offered, p.Attempted, p.Goodput, p.Rejected, p.Throttled, fmtLatency(p.P50), fmtLatency(p.P99), p.InFlight)
	if p.Failed > 0 {
		s += fmt.Sprintf("  failed %.0f/s", p.Failed)
		for _, k := range sortedKeys(p.FailedBy) {
			s += fmt.Sprintf(" %s %.0f", k, p.FailedBy[k])
		}
	}
	return s
}

func fmtLatency(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return d.Round(time.Millisecond).String()
}

func (g *generator) progress(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last [totalIdx + int(numOutcomes)]int64
	var lastF [numFailures]int64
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			var cur [totalIdx + int(numOutcomes)]int64
			for i := range cur {
				cur[i] = g.total[i].Load()
			}
			d := func(i int) float64 { return float64(cur[i] - last[i]) }
			p := Progress{
				Elapsed:   now.Sub(g.start),
				Offered:   d(offeredIdx),
				Attempted: d(attemptedIdx),
				Goodput:   d(totalIdx + int(Goodput)),
				Rejected:  d(totalIdx + int(Rejected)),
				Throttled: d(totalIdx + int(Throttled)),
				Failed:    d(totalIdx+int(Failed)) + d(totalIdx+int(GenError)),
				InFlight:  g.inflight.Load(),
			}
			for f := range lastF {
				v := g.failures[f].Load()
				if n := v - lastF[f]; n > 0 {
					if p.FailedBy == nil {
						p.FailedBy = map[string]float64{}
					}
					p.FailedBy[Failure(f).String()] = float64(n)
				}
				lastF[f] = v
			}
			if n := d(totalIdx + int(GenError)); n > 0 {
				if p.FailedBy == nil {
					p.FailedBy = map[string]float64{}
				}
				p.FailedBy[generatorFailure] = n
			}
			last = cur
			p.Phase = g.phaseAt(p.Elapsed)
			g.mu.Lock()
			if g.interval.TotalCount() > 0 {
				p.P50 = time.Duration(g.interval.ValueAtQuantile(50)) * time.Microsecond
				p.P99 = time.Duration(g.interval.ValueAtQuantile(99)) * time.Microsecond
			}
			g.interval.Reset()
			g.mu.Unlock()
			g.cfg.Progress(p)
		}
	}
}

func (g *generator) phaseAt(el time.Duration) string {
	for i, p := range g.cfg.Phases {
		if el >= g.offsets[i] && el < g.offsets[i]+p.Duration {
			return p.Name
		}
	}
	return "drain"
}
