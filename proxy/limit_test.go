package proxy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/levee-dev/levee/limit"
)

func testLimitParams() limitParams {
	c := DefaultConfig().Limit
	return c.params()
}

func TestLimitStep(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := time.Millisecond
	tests := []struct {
		name   string
		limit  float64
		base   time.Duration
		w      window
		cap    int
		want   int
		wantPh probePhase
	}{
		{"no samples: unchanged", 20, 10 * ms, window{}, 1000, 20, probeOff},
		{"app-limited: unchanged", 20, 10 * ms, window{n: 50, rtt: 10 * ms, peak: 9}, 1000, 20, probeOff},
		{"no queue and in use: grows by a quarter", 16, 10 * ms, window{n: 50, rtt: 10 * ms, peak: 10}, 1000, 20, probeOff},
		{"short queue and in use: grows by √limit", 16, 10 * ms, window{n: 50, rtt: 13 * ms, peak: 16}, 1000, 20, probeOff},
		{"queueing 2×: shrinks by the gradient", 20, 10 * ms, window{n: 50, rtt: 20 * ms, peak: 20}, 1000, 15, probeOff},
		{"queueing 10×: at most halved", 20, 10 * ms, window{n: 50, rtt: 100 * ms, peak: 20}, 1000, 10, probeOff},
		{"overload answer: backs off", 20, 10 * ms, window{n: 50, rtt: 10 * ms, peak: 20, overload: 1}, 1000, 18, probeOff},
		{"only overload answers: backs off", 20, 10 * ms, window{overload: 5, peak: 20}, 1000, 18, probeOff},
		{"overload below the limit: backs off from the peak", 40, 10 * ms, window{n: 50, rtt: 10 * ms, peak: 10, overload: 1}, 1000, 9, probeOff},
		{"reported load past the target: backs off", 20, 10 * ms, window{n: 50, rtt: 10 * ms, peak: 20, load: 1.3}, 1000, 18, probeOff},
		{"reported load near the target: holds", 20, 10 * ms, window{n: 50, rtt: 10 * ms, peak: 20, load: 0.95}, 1000, 20, probeOff},
		{"reported load low: grows", 16, 10 * ms, window{n: 50, rtt: 10 * ms, peak: 16, load: 0.5}, 1000, 20, probeOff},
		{"too slow at the floor: the baseline is stale, probe", 2, 10 * ms, window{n: 5, rtt: 100 * ms, peak: 2}, 1000, 2, probeDrain},
		{"slow start cap: in use at the cap grows", 20, 10 * ms, window{n: 5, rtt: 10 * ms, peak: 2}, 2, 25, probeOff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newAdaptiveLimit(testLimitParams(), 1)
			l.limit, l.base, l.next = tt.limit, tt.base, t0.Add(time.Hour)
			if tt.w.load == 0 {
				tt.w.load = -1 // none reported
			}
			l.step(t0.Add(time.Second), tt.w, tt.cap)
			if got := l.value(); got != tt.want {
				t.Errorf("limit = %d, want %d", got, tt.want)
			}
			if l.phase != tt.wantPh {
				t.Errorf("phase = %d, want %d", l.phase, tt.wantPh)
			}
		})
	}
}

// fixedBackend is a fluid model of a backend with n workers each holding a
// request for service, FIFO, fed as much as the limit allows (a saturated
// proxy): the latency of a request sent with c in flight is service ×
// max(1, c/n).
type fixedBackend struct {
	n       int
	service time.Duration
}

// run steps a limiter against b for d of virtual time in windows of 100 ms
// with ±5% noise on the latency, and returns the limits seen after the
// first minute (min, max) and the served share of b's capacity over the
// whole run.
func (b fixedBackend) run(d time.Duration, value func() int, update func(now time.Time, w window)) (lo, hi int, served float64) {
	const dt = 100 * time.Millisecond
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Unix(0, 0)
	inflight := float64(value())
	lo, hi = math.MaxInt, 0
	var done, capacity, carry float64
	for el := time.Duration(0); el < d; el += dt {
		// Demand fills a raised limit at once; requests above a lowered
		// one leave as they complete.
		lim := float64(value())
		start := inflight
		rate := math.Min(inflight, float64(b.n)) / b.service.Seconds()
		completions := rate * dt.Seconds()
		if lim >= inflight {
			inflight = lim
		} else {
			inflight = math.Max(lim, inflight-completions)
		}
		peak := math.Max(start, inflight)
		mean := (start + inflight) / 2
		rtt := float64(b.service) * math.Max(1, mean/float64(b.n))
		carry += completions
		n := int(carry)
		carry -= float64(n)
		noisy := time.Duration(rtt * (0.95 + 0.1*rng.Float64()))
		update(t0.Add(el+dt), window{n: n, rtt: noisy, peak: int(math.Ceil(peak)), load: -1})
		done += completions
		capacity += float64(b.n) / b.service.Seconds() * dt.Seconds()
		if el >= time.Minute {
			v := value()
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return lo, hi, done / capacity
}

// proxyLimit runs the proxy's limit the way the control loop does:
// windows with fewer than minSamples answers are merged (up to a second).
func proxyLimit(p limitParams) (func() int, func(time.Time, window)) {
	l := newAdaptiveLimit(p, 1)
	var pend pending
	return l.value, func(now time.Time, w window) {
		if pend.start.IsZero() {
			pend.start = now
		}
		pend.w.n += w.n
		pend.sum += time.Duration(w.n) * w.rtt
		pend.w.overload += w.overload
		pend.w.peak = max(pend.w.peak, w.peak)
		if pend.w.n < minSamples && now.Sub(pend.start) < time.Second {
			return
		}
		full := pend.w
		if full.n > 0 {
			full.rtt = pend.sum / time.Duration(full.n)
		}
		l.step(now, full, l.value())
		pend = pending{start: now}
	}
}

// TestLimitShapes sweeps backend shapes (1 … 256 workers, 100 µs … 1 s per
// request) for ten minutes of saturation: the limit settles between the
// backend's workers and Tolerance (plus the √limit allowance) times them,
// and the backend stays busy.
func TestLimitShapes(t *testing.T) {
	for _, n := range []int{1, 4, 16, 64, 256} {
		for _, svc := range []time.Duration{100 * time.Microsecond, time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond, time.Second} {
			t.Run(fmt.Sprintf("workers=%d/service=%v", n, svc), func(t *testing.T) {
				p := testLimitParams()
				value, update := proxyLimit(p)
				lo, hi, served := fixedBackend{n, svc}.run(10*time.Minute, value, update)
				// Probes pin it at probeShare; at the top, a sawtooth of
				// √limit above the Tolerance point, which the latency
				// noise (±5%) moves by a few percent.
				top := 1.6*float64(n) + 1
				wantLo := max(p.min, int(float64(n)*p.probeShare))
				wantHi := int(math.Ceil(top+2*math.Sqrt(top))) + 2
				if lo < wantLo || hi > wantHi {
					t.Errorf("limit range [%d, %d], want within [%d, %d]", lo, hi, wantLo, wantHi)
				}
				if served < 0.95 {
					t.Errorf("served %.3f of capacity, want ≥ 0.95", served)
				}
			})
		}
	}
}

// TestLimitNoRatchet is why the proxy has its own limit: in front of a
// backend saturated for ten minutes, limit.Gradient's baseline (a long
// average) and limit.AIMD's (a windowed minimum) creep up with the queue
// they cause and the limit ratchets far above the backend's workers; the
// proxy's limit stays near them.
func TestLimitNoRatchet(t *testing.T) {
	b := fixedBackend{n: 10, service: 20 * time.Millisecond}
	opts := []limit.Option{limit.WithMinLimit(2), limit.WithInitialLimit(20), limit.WithMaxLimit(1000)}
	g := limit.NewGradient(opts...)
	a := limit.NewAIMD(opts...)
	peers := []struct {
		name string
		l    limit.Limiter
	}{{"gradient", g}, {"aimd", a}}
	for _, pl := range peers {
		_, hi, _ := b.run(10*time.Minute, pl.l.Limit, func(now time.Time, w window) { pl.l.Update(now, w.rtt, w.peak) })
		t.Logf("limit.%s: highest limit after the first minute %d (backend workers %d)", pl.name, hi, b.n)
		if hi < 5*b.n {
			t.Logf("limit.%s no longer ratchets (%d): the proxy may use it", pl.name, hi)
		}
	}
	value, update := proxyLimit(testLimitParams())
	_, hi, _ := b.run(10*time.Minute, value, update)
	if hi > 2*b.n+4 {
		t.Errorf("proxy limit reached %d, want ≤ %d", hi, 2*b.n+4)
	}
	t.Logf("proxy: highest limit after the first minute %d", hi)
}

// TestLimitProbe: a backend that becomes twice as slow for good (a new
// release) gets its new baseline from a probe, and its limit comes back
// to its workers.
func TestLimitProbe(t *testing.T) {
	p := testLimitParams()
	value, update := proxyLimit(p)
	fast := fixedBackend{n: 10, service: 10 * time.Millisecond}
	fast.run(2*time.Minute, value, update)
	slow := fixedBackend{n: 10, service: 20 * time.Millisecond}
	lo, hi, served := slow.run(5*time.Minute, value, update)
	if lo < 2 || hi > 25 {
		t.Errorf("after slowing down: limit range [%d, %d], want within [2, 25]", lo, hi)
	}
	if served < 0.9 {
		t.Errorf("served %.3f of the slow backend's capacity, want ≥ 0.9", served)
	}
}

// TestLimitCeiling: after an overload answer at 12 in flight, the limit
// grows back to 11 at most for ceilingMemory, then one per round trip.
func TestLimitCeiling(t *testing.T) {
	l := newAdaptiveLimit(testLimitParams(), 1)
	t0 := time.Unix(0, 0)
	ms := time.Millisecond
	l.limit, l.base, l.next = 12, 10*ms, t0.Add(time.Hour)
	l.step(t0, window{n: 10, rtt: 10 * ms, peak: 12, overload: 1, load: -1}, 1000)
	now := t0
	var got []int
	for range 6 {
		now = now.Add(time.Second)
		l.step(now, window{n: 50, rtt: 10 * ms, peak: l.value(), load: -1}, 1000)
		got = append(got, l.value())
	}
	if want := []int{11, 11, 11, 11, 11, 11}; !slices.Equal(got, want) {
		t.Errorf("within the memory: %v, want %v", got, want)
	}
	now = t0.Add(ceilingMemory)
	got = got[:0]
	for range 3 {
		now = now.Add(time.Second)
		l.step(now, window{n: 50, rtt: 10 * ms, peak: l.value(), load: -1}, 1000)
		got = append(got, l.value())
	}
	if want := []int{12, 13, 14}; !slices.Equal(got, want) {
		t.Errorf("past the memory: %v, want %v", got, want)
	}
}

func TestLimitProbePhases(t *testing.T) {
	p := testLimitParams()
	l := newAdaptiveLimit(p, 1)
	t0 := time.Unix(0, 0)
	ms := time.Millisecond
	l.limit, l.base, l.next = 40, 10*ms, t0.Add(p.probeEvery)
	// In use when a probe is due: it starts.
	l.step(t0.Add(p.probeEvery), window{n: 100, rtt: 30 * ms, peak: 40}, 1000)
	if !l.probing() || l.value() != int(math.Ceil(l.saved*p.probeShare)) {
		t.Fatalf("probing=%v value=%d saved=%v, want a probe pinned at %v", l.probing(), l.value(), l.saved, l.saved*p.probeShare)
	}
	saved := l.saved
	// Old requests still in flight: keep draining.
	l.step(t0.Add(p.probeEvery+100*ms), window{n: 50, rtt: 30 * ms, peak: 40}, 1000)
	if l.phase != probeDrain {
		t.Fatalf("phase = %d, want drain", l.phase)
	}
	l.step(t0.Add(p.probeEvery+200*ms), window{n: 50, rtt: 25 * ms, peak: l.pinned()}, 1000)
	if l.phase != probeMeasure {
		t.Fatalf("phase = %d, want measure", l.phase)
	}
	l.step(t0.Add(p.probeEvery+300*ms), window{n: 50, rtt: 20 * ms, peak: l.pinned()}, 1000)
	end := t0.Add(p.probeEvery + 300*ms)
	if l.probing() || l.base != 20*ms || l.limit != saved || !l.next.Equal(end.Add(p.probeEvery)) {
		t.Errorf("after the probe: probing=%v base=%v limit=%v next=%v, want off, 20ms, %v, %v",
			l.probing(), l.base, l.limit, l.next, saved, end.Add(p.probeEvery))
	}
}
