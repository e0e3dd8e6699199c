package admit_test

import (
	"context"
	"math"
	"math/rand/v2"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// plant is a virtual-time server for admission tests: a fluid model of a
// CPU. Admitted requests add cost units of work to a backlog, rejected ones
// rejCost units paid at once; the server does work at rate c0/target units
// per second, so that with cost 1 the utilisation sits at target when c0
// requests per second are admitted and nothing is rejected. Its signal is
// the utilisation (work done ÷ work it could have done) over each sample
// period, reported one sample late and with ±noise multiplicative noise.
type plant struct {
	c0      float64 // requests/s at target with cost 1 and no rejections
	target  float64 // signal target (utilisation)
	cost    float64 // work units per admitted request
	rejCost float64 // work units per rejection
	noise   float64 // relative amplitude of the uniform noise
	idle    float64 // work done whatever is admitted (runtime, timers, sampling), share of capacityWork
	period  time.Duration
	rng     *rand.Rand

	backlog float64 // request work waiting
	rejWork float64 // rejection work waiting
	busy    float64 // work done in the current sample period
	elapsed time.Duration
	samples [8]float64 // newest first
	lag     int        // samples of delay before a reading is reported (1 = the acceptance plant)
	smooth  float64    // EWMA weight of the new sample in the reported value; 0 = none
	value   float64

	// Cumulative, read by the driver.
	completed float64 // requests completed (fluid)
	work      float64 // work done
}

func newPlant(c0 float64, seed uint64) *plant {
	return &plant{
		c0: c0, target: 0.8, cost: 1, rejCost: 0.02, noise: 0.05,
		period: 50 * time.Millisecond, lag: 1,
		rng: rand.New(rand.NewPCG(seed, 0x5eed)),
	}
}

func (p *plant) Name() string    { return "cpu" }
func (p *plant) Value() float64  { return p.value }
func (p *plant) Target() float64 { return p.target }

// capacityWork is the work the server does per second.
func (p *plant) capacityWork() float64 { return p.c0 / p.target }

// atTarget returns the admitted rate at which the utilisation sits at the
// target when offered requests per second arrive: C of the acceptance
// criteria, which accounts for the work rejections cost.
func (p *plant) atTarget(offered float64) float64 {
	a := (p.c0 - p.idle*p.capacityWork() - p.rejCost*offered) / (p.cost - p.rejCost)
	return math.Min(a, offered)
}

func (p *plant) admitted() { p.backlog += p.cost }
func (p *plant) rejected() { p.rejWork += p.rejCost }

// advance runs the server for dt and reports whether a sample period ended
// (the signal changed).
func (p *plant) advance(dt time.Duration) bool {
	avail := p.capacityWork() * dt.Seconds()
	iw := p.idle * avail
	avail -= iw
	rw := math.Min(p.rejWork, avail)
	p.rejWork -= rw
	done := math.Min(p.backlog, avail-rw)
	p.backlog -= done
	p.completed += done / p.cost
	p.busy += iw + rw + done
	p.work += iw + rw + done
	p.elapsed += dt
	if p.elapsed < p.period {
		return false
	}
	u := p.busy / (p.capacityWork() * p.elapsed.Seconds())
	p.busy, p.elapsed = 0, 0
	copy(p.samples[1:], p.samples[:len(p.samples)-1])
	p.samples[0] = u
	v := p.samples[p.lag] * (1 + p.noise*(2*p.rng.Float64()-1))
	if p.smooth > 0 {
		v = p.value + p.smooth*(v-p.value)
	}
	p.value = v
	return true
}

// source is one stream of requests: Poisson arrivals at rate(at) per
// second, all with the same context.
type source struct {
	ctx  context.Context
	rate func(at time.Duration) float64
	pick func(i int) context.Context // optional: context of the i-th request
	// retries: a rejected request is sent again at once, up to this many
	// times (naive clients); admitted and rejected count attempts, served
	// and refused requests.
	retries int

	n, admitted, rejected int
	served, refused       int
	retryAfter            []time.Duration // of overload rejections, if recorded
	record                bool
	winAdm, winRej        int
}

// window is one measurement window of a simulation.
type window struct {
	start, end         time.Duration
	completed, util    float64 // completed requests/s, mean true utilisation
	admitted, rejected float64 // per second, all sources
	offered, atTarget  float64 // per second
	srcAdm, srcRej     []int
}

// sim drives a Controller and a plant on virtual time with 1 ms steps,
// calling Step at every sample period (the control period equals the
// sample period), and measures windows of length win.
type sim struct {
	ctl   *admit.Controller
	p     *plant
	srcs  []*source
	t0    time.Time
	at    time.Duration
	hook  func(at time.Duration, now time.Time) // after each Step
	onRej func(at time.Duration, err error)
}

func (s *sim) run(dur, win time.Duration) []window {
	const tick = time.Millisecond
	var wins []window
	cur := window{start: s.at}
	lastCompleted, lastWork := s.p.completed, s.p.work
	var adm, rej, off int
	end := s.at + dur
	for s.at < end {
		now := s.t0.Add(s.at)
		for _, src := range s.srcs {
			lambda := src.rate(s.at) * tick.Seconds()
			k := poisson(s.p.rng, lambda)
			for range k {
				ctx := src.ctx
				if src.pick != nil {
					ctx = src.pick(src.n)
				}
				src.n++
				for attempt := 0; ; attempt++ {
					off++
					t, err := s.ctl.AdmitAt(ctx, now)
					if err != nil {
						src.rejected++
						src.winRej++
						rej++
						s.p.rejected()
						if s.onRej != nil {
							s.onRej(s.at, err)
						}
						if attempt < src.retries {
							continue
						}
						src.refused++
						break
					}
					src.admitted++
					src.winAdm++
					adm++
					s.p.admitted()
					t.DoneAt(now, nil)
					src.served++
					break
				}
			}
		}
		s.at += tick
		if s.p.advance(tick) {
			s.ctl.Step(s.t0.Add(s.at))
			if s.hook != nil {
				s.hook(s.at, s.t0.Add(s.at))
			}
		}
		if s.at-cur.start >= win {
			sec := (s.at - cur.start).Seconds()
			cur.end = s.at
			cur.completed = (s.p.completed - lastCompleted) / sec
			cur.util = (s.p.work - lastWork) / (s.p.capacityWork() * sec)
			cur.admitted, cur.rejected, cur.offered = float64(adm)/sec, float64(rej)/sec, float64(off)/sec
			cur.atTarget = s.p.atTarget(cur.offered)
			for _, src := range s.srcs {
				cur.srcAdm = append(cur.srcAdm, src.winAdm)
				cur.srcRej = append(cur.srcRej, src.winRej)
				src.winAdm, src.winRej = 0, 0
			}
			wins = append(wins, cur)
			cur = window{start: s.at}
			lastCompleted, lastWork = s.p.completed, s.p.work
			adm, rej, off = 0, 0, 0
		}
	}
	return wins
}

// oneSource is a sim of plant p under a controller seeded with seed and
// one source of requests carrying ctx at rate.
func oneSource(p *plant, seed uint64, ctx context.Context, rate func(time.Duration) float64) *sim {
	ctl := admit.New(admit.WithSignals(p), admit.WithSeed(seed))
	return &sim{ctl: ctl, p: p, srcs: []*source{{ctx: ctx, rate: rate}}, t0: time.Unix(1_700_000_000, 0)}
}

// oneTenant is a request from the one tenant every client is when all of
// them sit behind one address (a load balancer, or loopback).
var oneTenant = levee.WithCall(context.Background(), levee.Call{Tenant: "10.0.0.1"})

// poisson draws from a Poisson distribution with mean lambda (Knuth for
// small means, a normal approximation above 30).
func poisson(r *rand.Rand, lambda float64) int {
	if lambda <= 0 {
		return 0
	}
	if lambda > 30 {
		return max(0, int(math.Round(lambda+math.Sqrt(lambda)*r.NormFloat64())))
	}
	l := math.Exp(-lambda)
	k, p := 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}

// constant returns a rate function.
func constant(r float64) func(time.Duration) float64 {
	return func(time.Duration) float64 { return r }
}

// steps returns a piecewise-constant rate: rates[i] from at[i] on.
func steps(at []time.Duration, rates []float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		r := 0.0
		for i := range at {
			if t >= at[i] {
				r = rates[i]
			}
		}
		return r
	}
}
