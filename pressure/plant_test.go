package pressure

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// server is a service on virtual time, stepped every 100 µs, for the
// concurrency signal's tests. Each admitted request runs in one of two
// shapes:
//
//   - pool (pool > 0): cpu of CPU, then it waits in FIFO order for one of
//     pool connections to a dependency and holds it for dep(now) (±20%);
//   - CPU-bound (pool = 0): work of CPU on cores cores shared equally by
//     the requests in the handler (processor sharing, as goroutines share
//     Ps), at most runBound at once (admit's run queue) — the rest wait
//     before the handler, where the concurrency signal does not see them.
//
// A controller steps every 50 ms: it cuts the admitted fraction when the
// load (the larger of the concurrency signal's value and CPU ÷ 0.95) is
// above 1 and not yet falling, and raises it by 5% when below 0.9 (50%
// below 0.5), as a
// rate-steering admission controller does. Requests carry a 1 s deadline; the handler never looks
// at it (the work is done even for a caller that has gone).
type server struct {
	rng  *rand.Rand
	conc *Concurrency
	now  time.Time
	t    time.Duration // since start

	pool     int
	cpu      time.Duration
	dep      func(t time.Duration) time.Duration
	cores    float64
	work     time.Duration
	runBound int
	rate     func(t time.Duration) float64 // offered requests per second
	deadline time.Duration

	admit  float64 // admitted fraction
	last   float64 // the controller's previous load
	busy   float64 // CPU time used in the current sample, seconds
	u      float64 // CPU utilisation of the last sample
	cpuOff bool    // the controller ignores CPU

	live     []*job // in the handler
	before   []*job // waiting before the handler (CPU-bound shape)
	queue    []*job // waiting for a connection
	freeConn int

	stats []second
	trace []sample
}

type job struct {
	arrive, started time.Duration
	st              Start
	cpuLeft         time.Duration // CPU still to burn
	holdUntil       time.Duration // connection released at; 0 = none held
	budget          time.Duration
}

type second struct {
	offered, admitted, good, late int
	lat                           []time.Duration // in-handler times of the good ones
}

type sample struct {
	t           time.Duration
	value, load float64
	admit       float64
	r           ConcurrencyReading
}

const plantStep = 100 * time.Microsecond

func newServer(seed uint64, opts ...ConcurrencyOption) *server {
	s := &server{
		rng:      rand.New(rand.NewPCG(seed, 7)),
		now:      t0,
		admit:    1,
		deadline: time.Second,
		runBound: 1 << 30,
	}
	opts = append([]ConcurrencyOption{WithConcurrencyCPU(func() float64 { return s.u })}, opts...)
	s.conc = NewConcurrency(opts...)
	return s
}

func (s *server) bucket() *second {
	i := int(s.t / time.Second)
	for len(s.stats) <= i {
		s.stats = append(s.stats, second{})
	}
	return &s.stats[i]
}

// run advances the server by d.
func (s *server) run(d time.Duration) {
	if s.freeConn == 0 && s.pool > 0 && len(s.live) == 0 {
		s.freeConn = s.pool
	}
	end := s.t + d
	for s.t < end {
		s.t += plantStep
		s.now = s.now.Add(plantStep)
		s.arrivals()
		s.serve()
		if s.t%(50*time.Millisecond) == 0 {
			s.control()
		}
	}
}

func (s *server) arrivals() {
	lam := s.rate(s.t) * plantStep.Seconds()
	n := poisson(s.rng, lam)
	b := s.bucket()
	for range n {
		b.offered++
		if s.rng.Float64() >= s.admit {
			continue
		}
		b.admitted++
		j := &job{arrive: s.t, budget: s.deadline}
		if s.pool > 0 {
			j.cpuLeft = s.cpu
		} else {
			j.cpuLeft = s.work
		}
		s.before = append(s.before, j)
	}
	for len(s.before) > 0 && len(s.live) < s.runBound {
		j := s.before[0]
		s.before = s.before[1:]
		left := j.budget - (s.t - j.arrive)
		j.started = s.t
		j.st = s.conc.StartAt(s.now, left)
		s.live = append(s.live, j)
	}
}

func (s *server) serve() {
	if s.pool > 0 {
		s.servePool()
	} else {
		s.serveShared()
	}
}

func (s *server) servePool() {
	// CPU: one core, ample for 200 µs requests; no sharing modelled.
	kept := s.live[:0]
	for _, j := range s.live {
		switch {
		case j.cpuLeft > 0:
			j.cpuLeft -= plantStep
			s.busy += plantStep.Seconds()
			if j.cpuLeft <= 0 {
				s.queue = append(s.queue, j)
			}
		case j.holdUntil > 0 && s.t >= j.holdUntil:
			s.freeConn++
			s.finish(j)
			continue
		}
		kept = append(kept, j)
	}
	s.live = kept
	for s.freeConn > 0 && len(s.queue) > 0 {
		j := s.queue[0]
		s.queue = s.queue[1:]
		s.freeConn--
		d := float64(s.dep(s.t)) * (0.8 + 0.4*s.rng.Float64())
		j.holdUntil = s.t + time.Duration(d)
	}
}

func (s *server) serveShared() {
	n := float64(len(s.live))
	if n == 0 {
		return
	}
	share := math.Min(1, s.cores/n)
	s.busy += math.Min(n, s.cores) * plantStep.Seconds()
	kept := s.live[:0]
	for _, j := range s.live {
		j.cpuLeft -= time.Duration(share * float64(plantStep))
		if j.cpuLeft <= 0 {
			s.finish(j)
			continue
		}
		kept = append(kept, j)
	}
	s.live = kept
}

func (s *server) finish(j *job) {
	s.conc.DoneAt(j.st, s.now, 0)
	b := s.bucket()
	if s.t-j.arrive > j.budget {
		b.late++
		return
	}
	b.good++
	b.lat = append(b.lat, s.t-j.started)
}

func (s *server) control() {
	cores := s.cores
	if s.pool > 0 {
		cores = 1
	}
	s.u = s.busy / (50 * time.Millisecond).Seconds() / cores
	s.busy = 0
	s.conc.SampleAt(s.now)
	v := s.conc.Value()
	load := v
	if !s.cpuOff {
		load = math.Max(v, s.u/0.95)
	}
	switch {
	case load > 1 && load >= s.last:
		s.admit = math.Max(0.005, s.admit*math.Max(0.5, 1/math.Sqrt(load)))
	case load < 0.5:
		s.admit = math.Min(1, s.admit*1.5)
	case load < 0.9:
		s.admit = math.Min(1, s.admit*1.05)
	}
	s.last = load
	s.trace = append(s.trace, sample{t: s.t, value: v, load: load, admit: s.admit, r: s.conc.Reading()})
}

// goodput returns the good requests per second over [from, to) seconds.
func (s *server) goodput(from, to int) float64 {
	n := 0
	for i := from; i < to && i < len(s.stats); i++ {
		n += s.stats[i].good
	}
	return float64(n) / float64(to-from)
}

// p99 returns the 99th percentile in-handler time of the good requests in
// [from, to) seconds.
func (s *server) p99(from, to int) time.Duration {
	var all []time.Duration
	for i := from; i < to && i < len(s.stats); i++ {
		all = append(all, s.stats[i].lat...)
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return all[len(all)*99/100]
}

// tripped returns the share of control periods in [from, to) seconds in
// which the concurrency signal read above its target.
func (s *server) tripped(from, to time.Duration) float64 {
	n, over := 0, 0
	for _, x := range s.trace {
		if x.t >= from && x.t < to {
			n++
			if x.value > 1 {
				over++
			}
		}
	}
	return float64(over) / float64(max(n, 1))
}

func poisson(r *rand.Rand, lam float64) int {
	if lam > 30 {
		return max(0, int(math.Round(lam+math.Sqrt(lam)*r.NormFloat64())))
	}
	l, k, p := math.Exp(-lam), 0, 1.0
	for {
		p *= r.Float64()
		if p <= l {
			return k
		}
		k++
	}
}
