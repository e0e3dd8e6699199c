package proxy

import (
	"context"
	"errors"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/smooth"
)

// balancer places requests on backends: power of two choices among the
// backends in rotation with a free slot, the one with the lower score
// (in-flight ÷ capacity × cost) wins; when none has a free slot the request
// waits in the queue. Its control loop (step) learns the limits, ejects and
// returns backends within the cap, ramps returning ones, and publishes
// each backend's capacity and cost for the request path.
type balancer struct {
	set   atomic.Pointer[[]*backend] // the backends, by address; never nil
	queue waitQueue
	rand  func() uint64

	mu    sync.Mutex // the control loop's state
	all   []*backend // set, plus removed backends still draining
	freed smooth.EWMA
	last  time.Time // the previous step
}

// exclude lists at most two backends a pick must avoid: the previous
// attempt's (never the same backend twice in a row) and one that
// throttled this request.
type exclude [2]*backend

func (e exclude) has(b *backend) bool { return b != nil && (e[0] == b || e[1] == b) }
func (e exclude) empty() bool         { return e[0] == nil && e[1] == nil }

// errNoBackend is returned when no backend but the excluded ones is in
// rotation (none configured, none resolved, or all ejected and the cap
// allows none in).
var errNoBackend = errors.New("proxy: no backend in rotation")

func newBalancer(rand func() uint64) *balancer {
	bl := &balancer{rand: rand, freed: smooth.EWMA{Tau: time.Second}}
	bl.set.Store(&[]*backend{})
	bl.queue.setMax(1)
	return bl
}

// pick takes a slot on a backend chosen by two random choices, or returns
// nil when none outside excl has a free slot.
func (bl *balancer) pick(excl exclude) *backend {
	set := *bl.set.Load()
	for range 2 {
		b := choose(set, excl, bl.rand())
		if b == nil {
			return nil
		}
		if b.tryAcquire() {
			return b
		}
	}
	return nil
}

// choose draws two distinct backends with u and returns the available one
// with the lower score; when neither is available it scans for the best
// available backend; nil when there is none.
func choose(set []*backend, excl exclude, u uint64) *backend {
	n := len(set)
	if n == 0 {
		return nil
	}
	if n > 1 {
		i := int(uint64(uint32(u)) * uint64(n) >> 32)
		j := int((u >> 32) * uint64(n-1) >> 32)
		if j >= i {
			j++
		}
		a, b := set[i], set[j]
		okA := !excl.has(a) && a.available()
		okB := !excl.has(b) && b.available()
		switch {
		case okA && okB:
			if b.score() < a.score() {
				return b
			}
			return a
		case okA:
			return a
		case okB:
			return b
		}
	}
	var best *backend
	bs := math.Inf(1)
	for _, x := range set {
		if excl.has(x) || !x.available() {
			continue
		}
		if s := x.score(); best == nil || s < bs {
			best, bs = x, s
		}
	}
	return best
}

// routable reports whether a backend outside excl is in rotation, full or
// not.
func (bl *balancer) routable(excl exclude) bool {
	for _, b := range *bl.set.Load() {
		if !excl.has(b) && b.capacity.Load() > 0 {
			return true
		}
	}
	return false
}

// acquire returns a backend with a slot taken for a request of
// criticality c, waiting up to wait when all are full. While anybody
// waits, a newcomer queues behind them rather than take a freed slot.
func (bl *balancer) acquire(ctx context.Context, c levee.Criticality, excl exclude, wait time.Duration) (*backend, error) {
	if bl.queue.n.Load() == 0 {
		if b := bl.pick(excl); b != nil {
			return b, nil
		}
	}
	if !bl.routable(excl) {
		return nil, errNoBackend
	}
	return bl.queue.wait(ctx, c, excl, wait, bl.pick, bl.release)
}

// release frees b's slot, handing it to a waiter if one may use it.
func (bl *balancer) release(b *backend) {
	b.inflight.Add(-1)
	if bl.queue.n.Load() > 0 {
		bl.queue.handOff(b)
	}
}

// loopParams is what the control loop reads of the settings.
type loopParams struct {
	rot        rotationParams
	limit      limitParams
	loadDecay  time.Duration
	minSamples int
	maxWindow  time.Duration
	maxWaiting int
}

// costCapped multiplies the cost of a backend that should be ejected but
// is kept in by the cap: it gets traffic only when every other is full.
const costCapped = 1e3

// step is one period of the control loop at now: sample every backend's
// window into its limit, rotate (eject, return, within the cap), publish
// capacities and costs, reap drained backends, size the queue and serve
// its waiters. It returns the rotation changes, for the log.
func (bl *balancer) step(now time.Time, p *loopParams) (changes []rotationChange, restarted []*backend) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	set := *bl.set.Load()
	done := 0
	for _, b := range set {
		n, re := bl.sample(b, now, p)
		done += n
		if re {
			restarted = append(restarted, b)
		}
	}
	if dt := now.Sub(bl.last); !bl.last.IsZero() && dt > 0 {
		bl.queue.setRate(bl.freed.Update(float64(done)/dt.Seconds(), dt))
	}
	bl.last = now
	changes = rotate(set, &p.rot, now)
	total := 0
	for _, b := range set {
		total += int(bl.publish(b, now, p))
	}
	bl.reap()
	if p.maxWaiting > 0 {
		total = p.maxWaiting
	}
	bl.queue.setMax(max(total, 16))
	bl.queue.dispatch(bl.pick)
	return changes, restarted
}

// sample folds b's window into the pending one and steps its limit once
// the pending window holds enough samples or time. A backend that refused
// connections and now answers again restarted: it starts over, ramped. It
// returns the attempts that ended in the window and reports such a
// restart.
func (bl *balancer) sample(b *backend, now time.Time, p *loopParams) (ended int, restarted bool) {
	w := b.drainWindow()
	ended = w.n + w.overload
	if b.refused.Swap(false) {
		b.rot.cold = true
	}
	if b.rot.cold && !b.rot.ejected && w.n > 0 {
		b.rot.cold, b.rot.back = false, now
		b.lim.reset()
		b.pend = pending{start: now}
		return ended, true
	}
	pd := &b.pend
	if pd.start.IsZero() {
		pd.start = now
	}
	pd.w.n += w.n
	pd.sum += time.Duration(w.n) * w.rtt
	pd.w.overload += w.overload
	pd.w.peak = max(pd.w.peak, w.peak)
	if pd.w.n+pd.w.overload < p.minSamples && now.Sub(pd.start) < p.maxWindow {
		return ended, false
	}
	full := pd.w
	if full.n > 0 {
		full.rtt = pd.sum / time.Duration(full.n)
	}
	full.load = -1
	if at := b.loadAt.Load(); at != 0 && now.Sub(time.Unix(0, at)) < p.loadDecay {
		full.load = b.loadNow(now, p.loadDecay)
	}
	weight := slowStartWeight(now, b.rot.back, p.rot.slowWindow, p.rot.slowFloor)
	b.lim.step(now, full, max(1, int(float64(b.lim.value())*weight)))
	*pd = pending{start: now}
	return ended, false
}

// publish stores b's capacity and cost for the request path and returns
// the capacity.
func (bl *balancer) publish(b *backend, now time.Time, p *loopParams) int64 {
	if b.rot.ejected || b.rot.draining {
		b.capacity.Store(0)
		return 0
	}
	weight := slowStartWeight(now, b.rot.back, p.rot.slowWindow, p.rot.slowFloor)
	c := max(1, int64(math.Floor(float64(b.lim.value())*weight)))
	b.capacity.Store(c)
	cost := 1 + b.loadNow(now, p.loadDecay)
	if b.rot.capped {
		cost *= costCapped
	}
	b.cost.Store(math.Float64bits(cost))
	return c
}

// reap drops removed backends once their last request ended.
func (bl *balancer) reap() {
	keep := bl.all[:0]
	for _, b := range bl.all {
		if b.rot.draining && b.inflight.Load() <= 0 {
			if b.tr != nil {
				b.tr.CloseIdleConnections()
			}
			continue
		}
		keep = append(keep, b)
	}
	clear(bl.all[len(keep):])
	bl.all = keep
}

// update replaces the backend set with the backends news lists (by
// address; build makes the missing ones, reuse says whether an existing
// one can serve as it is). Backends that left drain: they take no new
// request and are dropped when their last one ends. New backends are
// ramped from now unless initial (the proxy's first set: ramping every
// backend at start would throttle the whole service). It returns the
// addresses added and removed.
func (bl *balancer) update(news []string, build func(addr string, old *backend) *backend,
	now time.Time, initial bool, p *loopParams) (added, removed []string) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	old := map[string]*backend{}
	for _, b := range *bl.set.Load() {
		old[b.addr] = b
	}
	next := make([]*backend, 0, len(news))
	seen := map[string]bool{}
	for _, addr := range news {
		if seen[addr] {
			continue
		}
		seen[addr] = true
		prev := old[addr]
		b := build(addr, prev)
		if b != prev {
			if prev != nil {
				// Same server, new connection settings: keep what was
				// learned.
				b.rot, b.lim, b.pend = prev.rot, prev.lim, prev.pend
				b.lim.setParams(p.limit)
				prev.rot.draining = true
				prev.capacity.Store(0)
			} else {
				added = append(added, addr)
				if !initial {
					b.rot.back = now
				}
			}
			bl.all = append(bl.all, b)
		}
		delete(old, addr)
		next = append(next, b)
		bl.publish(b, now, p)
	}
	for addr, b := range old {
		b.rot.draining = true
		b.capacity.Store(0)
		removed = append(removed, addr)
	}
	sort.Slice(next, func(i, j int) bool { return next[i].addr < next[j].addr })
	sort.Strings(removed)
	bl.set.Store(&next)
	bl.reap()
	return added, removed
}

// setParams applies reloaded parameters to every backend's limit and
// throttle (k, already checked); the rotation parameters are read at each
// step.
func (bl *balancer) setParams(p *loopParams, k float64) {
	bl.mu.Lock()
	defer bl.mu.Unlock()
	for _, b := range bl.all {
		b.lim.setParams(p.limit)
		if b.th != nil {
			_ = b.th.SetK(k)
		}
	}
}
