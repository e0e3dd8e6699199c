package admit_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// lateReader is a virtual-time model of a saturated one-core server that
// runs a goroutine per connection (net/http's HTTP/1): a request is read,
// and only then admitted or refused, when its connection's goroutine gets
// the core, in arrival order, behind the handlers that run. Admission
// decides at read time, so demand waits unread in the run queue where no
// count of arrivals sees it. An admitted request costs svc of CPU, a
// refusal rej; a request read more than deadline after it arrived has an
// expired deadline and is refused for it.
type lateReader struct {
	svc, rej, deadline time.Duration
	rng                *rand.Rand
	ctl                *admit.Controller
	expired            context.Context

	queue []time.Duration // arrival times of the requests not read yet
	busy  time.Duration   // CPU left on the request being served
	start time.Duration   // its arrival time
	adm   bool            // it was admitted

	// The signals' raw material since the last sample.
	cpu   time.Duration   // CPU used
	waits []time.Duration // run-queue waits of the requests read

	good, late int // admitted and finished within / after the deadline
	admitted   int
}

// lateCPU is the model's CPU use over the last sample period, one sample
// late, target 0.95, saturating at 1 (pressure's CPU).
type lateCPU struct{ v, next float64 }

func (c *lateCPU) Name() string        { return "cpu" }
func (c *lateCPU) Value() float64      { return c.v }
func (c *lateCPU) Target() float64     { return 0.95 }
func (c *lateCPU) Saturation() float64 { return 1 }

// lateSched is the p99 of the run-queue waits of the requests read in the
// last sample period, smoothed as pressure's scheduler latency is, target
// 50 ms.
type lateSched struct{ v float64 }

func (s *lateSched) Name() string    { return "sched_latency" }
func (s *lateSched) Value() float64  { return s.v }
func (s *lateSched) Target() float64 { return 0.05 }

// lateSchedUnread is lateSched that also counts the requests waiting
// unread, as pressure's scheduler latency counts runnable goroutines.
type lateSchedUnread struct {
	lateSched
	m *lateReader
}

func (s *lateSchedUnread) Unread() float64 { return float64(len(s.m.queue)) }

// run drives the model for dur at rate requests a second, from at, in
// 100 µs ticks, calling sample and Step every 50 ms; it returns the
// requests a second finished within their deadline per 200 ms window.
func (m *lateReader) run(at *time.Duration, dur time.Duration, rate float64, sample func(), t0 time.Time) []float64 {
	const tick = 100 * time.Microsecond
	const period = 50 * time.Millisecond
	const win = 200 * time.Millisecond
	var wins []float64
	good := m.good
	for end := *at + dur; *at < end; {
		for range poisson(m.rng, rate*tick.Seconds()) {
			m.queue = append(m.queue, *at)
		}
		m.serve(*at, tick, t0)
		*at += tick
		if *at%period == 0 {
			sample()
			m.ctl.Step(t0.Add(*at))
		}
		if *at%win == 0 {
			wins = append(wins, float64(m.good-good)/win.Seconds())
			good = m.good
		}
	}
	return wins
}

// serve gives the core to the run queue for one tick from now.
func (m *lateReader) serve(now, tick time.Duration, t0 time.Time) {
	left := tick
	for left > 0 {
		if m.busy == 0 {
			if len(m.queue) == 0 {
				return
			}
			m.read(now+tick-left, t0)
		}
		d := min(left, m.busy)
		m.busy -= d
		left -= d
		m.cpu += d
		if m.busy == 0 && m.adm {
			if done := now + tick - left; done-m.start <= m.deadline {
				m.good++
			} else {
				m.late++
			}
		}
	}
}

// read takes the oldest request off the run queue and decides it.
func (m *lateReader) read(now time.Duration, t0 time.Time) {
	arr := m.queue[0]
	m.queue = m.queue[1:]
	m.waits = append(m.waits, now-arr)
	ctx := context.Background()
	if now-arr > m.deadline {
		ctx = m.expired
	}
	tk, err := m.ctl.AdmitAt(ctx, t0.Add(now))
	m.start, m.adm = arr, err == nil
	if err != nil {
		m.busy = m.rej
		return
	}
	m.admitted++
	m.busy = m.svc
	tk.DoneAt(t0.Add(now+m.svc), nil)
}

// sampler returns the function that closes a sample period of the
// model's signals.
func (m *lateReader) sampler(cpu *lateCPU, sched *lateSched) func() {
	const period = 50 * time.Millisecond
	return func() {
		cpu.v, cpu.next = cpu.next, m.cpu.Seconds()/period.Seconds()
		m.cpu = 0
		raw := 0.0
		if len(m.waits) > 0 {
			slices.Sort(m.waits)
			raw = m.waits[int(0.99*float64(len(m.waits)-1))].Seconds()
		}
		m.waits = m.waits[:0]
		sched.v += (1 - math.Exp(-1)) * (raw - sched.v)
	}
}

// lateReadFlood runs the model through 0.7× for 3 s, 3× for 5 s and 0.7×
// for 3 s of its capacity, with or without the unread count. It returns
// the 3× phase's goodput ÷ capacity, its lowest 200 ms window ÷ capacity
// after the first 400 ms, the largest arrival rate the controller
// reported in the phase after its first 400 ms ÷ the rate offered, and
// the goodput of the phase after ÷ what it offered.
func lateReadFlood(seed uint64, svc time.Duration, unread bool) (spike, low, maxR, after float64) {
	capacity := 1 / svc.Seconds()
	m := &lateReader{svc: svc, rej: svc / 25, deadline: time.Second, rng: rand.New(rand.NewPCG(seed, 0x1a7e))}
	t0 := time.Unix(1_700_000_000, 0)
	var cancel context.CancelFunc
	m.expired, cancel = context.WithDeadline(context.Background(), t0)
	defer cancel()
	cpu := &lateCPU{}
	var sched *lateSched
	var sig admit.Option
	if unread {
		s := &lateSchedUnread{m: m}
		sched, sig = &s.lateSched, admit.WithSignals(cpu, s)
	} else {
		sched = &lateSched{}
		sig = admit.WithSignals(cpu, sched)
	}
	m.ctl = admit.New(sig, admit.WithSeed(seed))
	samples := m.sampler(cpu, sched)
	var at time.Duration
	m.run(&at, 3*time.Second, 0.7*capacity, samples, t0)
	good := m.good
	var ws []float64
	for i := range 25 {
		sample := samples
		if i >= 2 {
			sample = func() {
				samples()
				maxR = max(maxR, m.ctl.Snapshot().OfferedRPS/(3*capacity))
			}
		}
		ws = append(ws, m.run(&at, 200*time.Millisecond, 3*capacity, sample, t0)...)
	}
	spike = float64(m.good-good) / 5 / capacity
	low = slices.Min(ws[2:]) / capacity
	good = m.good
	m.run(&at, 3*time.Second, 0.7*capacity, samples, t0)
	after = float64(m.good-good) / 3 / (0.7 * capacity)
	return spike, low, maxR, after
}

// TestLateReadFloodCounted: a 3× flood on a server that reads its
// requests late (lateReader), at 2 ms (the demo's shape) and 20 ms per
// request. Without the unread count the arrivals the controller counts
// stay near the capacity while demand piles up unread; the backlog is
// then read at once and taken for a flood several times the real one,
// which the smoothed rate keeps for a while. With it the controller's
// arrival rate stays nearer the real one (at 2 ms within 1.5× of it on
// every seed; at 20 ms, a few requests a period, the rate's own noise
// still lets a jump through), the flood's lowest 200 ms and its goodput
// are no lower, and the phase after it is served.
func TestLateReadFloodCounted(t *testing.T) {
	for _, svc := range []time.Duration{2 * time.Millisecond, 20 * time.Millisecond} {
		var spikes, lows, rates [2][]float64
		for _, seed := range medianSeeds() {
			s0, l0, r0, a0 := lateReadFlood(seed, svc, false)
			s1, l1, r1, a1 := lateReadFlood(seed, svc, true)
			t.Logf("%v seed %d: 3× goodput ÷ capacity %.3f without the unread count, %.3f with it; lowest 200 ms %.2f / %.2f; largest arrival rate seen ÷ offered %.2f / %.2f; after %.3f / %.3f",
				svc, seed, s0, s1, l0, l1, r0, r1, a0, a1)
			if limit := map[time.Duration]float64{2 * time.Millisecond: 1.5}[svc]; limit > 0 && r1 > limit {
				t.Errorf("%v seed %d: the controller's arrival rate reached %.2f × the offered rate with the unread count, want ≤ %.1f", svc, seed, r1, limit)
			}
			if a1 < 0.9 {
				t.Errorf("%v seed %d: %.3f of the phase after the flood served, want ≥ 0.9", svc, seed, a1)
			}
			spikes[0], spikes[1] = append(spikes[0], s0), append(spikes[1], s1)
			lows[0], lows[1] = append(lows[0], l0), append(lows[1], l1)
			rates[0], rates[1] = append(rates[0], r0), append(rates[1], r1)
		}
		if m0, m1 := median(rates[0]), median(rates[1]); m1 >= m0 {
			t.Errorf("%v: median largest arrival rate ÷ offered %.2f with the unread count, %.2f without; want lower", svc, m1, m0)
		}
		if m0, m1 := median(spikes[0]), median(spikes[1]); m1 < m0-0.01 {
			t.Errorf("%v: median 3× goodput %.3f with the unread count, %.3f without; want no lower", svc, m1, m0)
		}
		if m0, m1 := median(lows[0]), median(lows[1]); m1 < m0 {
			t.Errorf("%v: median lowest 200 ms %.2f with the unread count, %.2f without; want no lower", svc, m1, m0)
		}
	}
}

// median returns the median of xs (sorted in place).
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
