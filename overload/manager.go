package overload

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
)

// Shedder is the admission controller's side of the Shed action:
// *admit.Controller's OverloadShed (a shed level in force until a time,
// whatever its signals say, in a slot of its own: a drill's forced level
// and the Manager's do not replace each other, the higher is in force).
// The Manager calls it at every step while the action is active, with an
// expiry a few periods ahead, and never to end it: when the action ends,
// or the Manager stops, the level expires by itself.
type Shedder interface {
	OverloadShed(level float64, until time.Time)
}

// Effector applies the actions to something the Manager does not own: an
// HTTP server's keep-alive, its connections' timeouts (leveehttp's
// Overload). Apply is called at the end of every step, with the state
// after it, from the goroutine that steps; it must return quickly and
// must not call Step.
type Effector interface {
	Apply(s State)
}

// State is what the actions do after a step.
type State struct {
	// Time is the step's time; Until when its state expires if no step
	// follows (3 periods, at least 300 ms, later).
	Time, Until time.Time
	// Level is the level after the step.
	Level Level
	// Active reports, per Action, whether it is active.
	Active [NumActions]bool
	// ShedFloor is the shed level the Shed action holds the controller
	// at, at least (0 when inactive).
	ShedFloor float64
	// Cap is the InFlight cap for CRITICAL requests, 0 when none. It
	// applies whenever it is set; Active[InFlight] reports whether the
	// requests in flight came within half of it (within its cooldown).
	Cap int64
	// BodyLimit is the LargeBodies limit in bytes.
	BodyLimit int64
	// IdleTimeout and HeaderTimeout are the Timeouts action's.
	IdleTimeout, HeaderTimeout time.Duration
}

// Manager turns resource readings into a level and the level into
// actions (see the package documentation). Build it with New, step it
// with Step (virtual time) or Run (real time), and put Enter and Exit
// around each request (leveehttp's Overload does, and applies the actions
// that concern connections).
//
// Enter and Exit are lock-free and allocation-free: at Normal, one atomic
// load and one atomic add; otherwise a time reading and a few compares
// more. Step, Status and State take a lock. Safe for concurrent use.
type Manager struct {
	cfg    config
	expiry time.Duration

	inflight atomic.Int64
	gate     atomic.Pointer[gate]
	refused  [numVerdicts][levee.NumCriticalities]atomic.Uint64

	collecting  atomic.Bool
	collections atomic.Uint64

	mu        sync.Mutex
	res       []resState
	level     Level
	since     time.Time // when level was entered
	holds     [NumActions]hold
	active    [NumActions]bool
	started   [NumActions]time.Time
	activeFor [NumActions]time.Duration
	flight    flight
	capv      int64     // the InFlight cap, 0 when none
	near      time.Time // when the requests in flight last came within half of it
	lastCap   uint64    // refusals for in-flight up to the previous step
	last      time.Time
	state     State
	effectors []Effector
}

// resState is one resource's state between steps.
type resState struct {
	r       Resource
	level   Level
	reading Reading
	value   float64 // the reading's Value, NaN when too old
	track   track
}

// gate is the request path's view of the actions, replaced at every
// step; nil while no action concerns requests.
type gate struct {
	until        time.Time
	criticalOnly bool
	bodyLimit    int64 // < 0: none
	caps         [levee.NumCriticalities]int64
}

// New returns a Manager. It panics with an "overload: ..." message on an
// option out of range (see Option).
func New(opts ...Option) *Manager {
	cfg := defaultConfig()
	if err := cfg.apply(opts); err != nil {
		panic(err)
	}
	m := &Manager{cfg: cfg, expiry: max(3*cfg.period, 300*time.Millisecond)}
	for _, r := range cfg.resources {
		m.res = append(m.res, resState{r: thresholded(r, cfg.thresholds), value: math.NaN(), reading: Reading{Value: math.NaN()}})
	}
	m.state = m.stateLocked(time.Time{})
	return m
}

// Reconfigure changes the Manager's tunables from its next step, as New
// would set them with opts: the actions' levels and cooldowns, the shed
// floors, the body limit, the timeouts, the in-flight shares and minimum,
// the staleness and the maximum age of readings, and the resources'
// thresholds (WithThresholds). A tunable opts do not set goes back to its
// default, and a resource whose thresholds they do not set goes back to
// those it was given: pass the whole configuration, as a configuration
// reload does. What the Manager is built from stays as New set it: its
// resources, period, shedder, logger, observer and collector (those
// options are ignored here). The levels, actions and cooldowns in course
// carry on under the new tunables. An option out of range changes
// nothing and is returned as the error New would panic with. Safe for
// concurrent use.
func (m *Manager) Reconfigure(opts ...Option) error {
	next := defaultConfig()
	if err := next.apply(opts); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &m.cfg
	c.actions, c.floors, c.bodyLimit = next.actions, next.floors, next.bodyLimit
	c.idle, c.header, c.shares, c.minFlight = next.idle, next.header, next.shares, next.minFlight
	c.staleAfter, c.maxAge, c.thresholds = next.staleAfter, next.maxAge, next.thresholds
	for i := range m.res {
		m.res[i].r = thresholded(c.resources[i], c.thresholds)
	}
	return nil
}

// Period returns the period at which Run steps.
func (m *Manager) Period() time.Duration { return m.cfg.period }

// Attach adds an effector, applied from the next step on. Safe to call
// at any time.
func (m *Manager) Attach(e Effector) {
	if e == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.effectors = append(m.effectors, e)
}

// Enter asks the Manager whether a request of criticality c, whose body
// is body bytes long (0 for none, -1 when its length is not declared),
// may go on, and counts it in flight when it may (Pass): the caller then
// calls Exit once when the request ends. It is Enter at time.Now(), read
// only while an action concerns requests. An invalid criticality counts
// as CRITICAL.
func (m *Manager) Enter(c levee.Criticality, body int64) Verdict {
	g := m.gate.Load()
	if g == nil {
		m.inflight.Add(1)
		return Pass
	}
	return m.enter(g, time.Now(), c, body)
}

// EnterAt is Enter at now, for virtual time.
func (m *Manager) EnterAt(now time.Time, c levee.Criticality, body int64) Verdict {
	g := m.gate.Load()
	if g == nil {
		m.inflight.Add(1)
		return Pass
	}
	return m.enter(g, now, c, body)
}

func (m *Manager) enter(g *gate, now time.Time, c levee.Criticality, body int64) Verdict {
	if !c.Valid() {
		c = levee.Critical
	}
	if c == levee.CriticalPlus || now.After(g.until) {
		m.inflight.Add(1)
		return Pass
	}
	v := Pass
	switch {
	case g.criticalOnly:
		v = RefuseCriticalOnly
	case g.bodyLimit >= 0 && (body < 0 || body > g.bodyLimit):
		v = RefuseBody
	default:
		if n := m.inflight.Add(1); n <= g.caps[c] {
			return Pass
		}
		m.inflight.Add(-1)
		v = RefuseInFlight
	}
	m.refused[v][c].Add(1)
	return v
}

// Exit ends a request Enter let through.
func (m *Manager) Exit() { m.inflight.Add(-1) }

// InFlight returns the requests in flight: those Enter let through and
// Exit has not ended.
func (m *Manager) InFlight() int64 { return max(0, m.inflight.Load()) }

// Refused returns how many requests of criticality c Enter refused with
// verdict v since New.
func (m *Manager) Refused(v Verdict, c levee.Criticality) uint64 {
	if v == Pass || v >= numVerdicts || !c.Valid() {
		return 0
	}
	return m.refused[v][c].Load()
}

// Level returns the level at the last step.
func (m *Manager) Level() Level {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.level
}

// State returns the actions' state at the last step.
func (m *Manager) State() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Run steps the Manager every period with real time until ctx is done,
// then ends every action at once (Stop) and returns.
func (m *Manager) Run(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	defer func() { m.Stop(time.Now()) }()
	m.Step(time.Now())
	t := time.NewTicker(m.cfg.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.Step(now)
		}
	}
}

// Stop ends every action at now: the requests in flight are no longer
// capped or refused, the effectors are told (keep-alive back on, the
// usual timeouts). A shed floor already given to the Shedder is left to
// expire, within 3 periods. The next Step starts again from the
// readings.
func (m *Manager) Stop(now time.Time) {
	m.mu.Lock()
	m.gate.Store(nil)
	var events []Event
	for a := range Action(NumActions) {
		if m.active[a] {
			m.activeFor[a] += max(0, now.Sub(m.last))
			events = append(events, Event{Time: now, Kind: ActionEnded, Action: a, Level: m.level, Active: now.Sub(m.started[a])})
		}
		m.active[a], m.holds[a] = false, hold{}
	}
	m.level, m.capv = Normal, 0
	for i := range m.res {
		m.res[i].level = Normal
	}
	m.last = now
	m.state = m.stateLocked(now)
	st, effs := m.state, append([]Effector(nil), m.effectors...)
	m.mu.Unlock()
	m.emit(events)
	for _, e := range effs {
		e.Apply(st)
	}
}

// Step reads every resource at now, updates the level and the actions,
// and applies them (the request gate, the Shedder, the effectors). Call
// it every period; Run does with real time.
func (m *Manager) Step(now time.Time) {
	m.mu.Lock()
	events := m.step(now)
	st, effs := m.state, append([]Effector(nil), m.effectors...)
	m.mu.Unlock()

	if st.Active[Shed] && st.ShedFloor > 0 && m.cfg.shedder != nil {
		m.cfg.shedder.OverloadShed(st.ShedFloor, st.Until)
	}
	m.emit(events)
	for _, e := range effs {
		e.Apply(st)
	}
}

// step is Step's work under the lock; it returns the changes to report.
func (m *Manager) step(now time.Time) []Event {
	dt := time.Duration(0)
	if !m.last.IsZero() && now.After(m.last) {
		dt = now.Sub(m.last)
	}
	m.last = now
	m.flight.push(m.InFlight())

	var events []Event
	level, driver := m.readResources(now)
	if level != m.level {
		e := Event{Time: now, Kind: LevelChanged, From: m.level, Level: level}
		if driver >= 0 {
			e.Resource, e.Value = m.res[driver].r.Name, m.res[driver].value
		}
		events = append(events, e)
		m.level, m.since = level, now
	}

	m.capv = m.inflightCap(now)
	var on [NumActions]bool
	for a := range Action(NumActions) {
		ac := m.cfg.actions[a]
		m.holds[a] = m.holds[a].step(level, now, ac.cooldown)
		on[a] = ac.level != Off && m.holds[a].level >= ac.level
	}
	// The cap applies whenever a resource sets one; the action counts as
	// active while the requests in flight come within half of it (and for
	// its cooldown after).
	if !on[InFlight] {
		m.capv = 0
	}
	if m.capv > 0 && 2*m.InFlight() >= m.capv {
		m.near = now
	}
	on[InFlight] = m.capv > 0 && !m.near.IsZero() && now.Sub(m.near) < max(m.cfg.actions[InFlight].cooldown, time.Nanosecond)
	for a := range Action(NumActions) {
		if m.active[a] {
			m.activeFor[a] += dt
		}
		switch {
		case on[a] && !m.active[a]:
			m.started[a] = now
			events = append(events, Event{Time: now, Kind: ActionStarted, Action: a, Level: level})
		case !on[a] && m.active[a]:
			events = append(events, Event{Time: now, Kind: ActionEnded, Action: a, Level: level, Active: now.Sub(m.started[a])})
		}
		m.active[a] = on[a]
	}
	m.maybeCollect(now)
	m.state = m.stateLocked(now)
	m.publish()
	return events
}

// readResources reads every resource and returns the level (the highest
// of theirs) and the index of the resource at it (-1 at Normal).
func (m *Manager) readResources(now time.Time) (Level, int) {
	level, driver, worst := Normal, -1, 0.0
	for i := range m.res {
		rs := &m.res[i]
		rd := rs.r.Read()
		v := rd.Value
		if !rd.Time.IsZero() && now.Sub(rd.Time) > m.cfg.maxAge {
			v = math.NaN()
		}
		rs.reading, rs.value = rd, v
		rs.track.see(rd, now, m.flight.steps)
		rs.level = levelFor(rs.level, v, rs.r.Enter, rs.r.margin())
		if rs.level == Normal {
			continue
		}
		// Among resources at the same level, the one furthest past its
		// threshold drives it.
		if over := v / rs.r.Enter[rs.level-1]; rs.level > level || (rs.level == level && over > worst) {
			level, driver, worst = rs.level, i, over
		}
	}
	return level, driver
}

// inflightCap is the InFlight stage over every resource with a Goal: the
// tightest cap they set, 0 when none sets one.
func (m *Manager) inflightCap(now time.Time) int64 {
	n := m.InFlight()
	capv := int64(0)
	for i := range m.res {
		rs := &m.res[i]
		if !(rs.r.Goal > 0) || math.IsNaN(rs.value) {
			continue
		}
		t := &rs.track
		t.update(rs.value, n, now)
		c := capFor(t.v, t.n, t.share, rs.r.Goal, m.cfg.minFlight)
		if t.share > 0 {
			seen := m.flight.mean(t.window(rs.reading, m.flight.steps))
			if ci := capFor(rs.value, seen, t.share, rs.r.Goal, m.cfg.minFlight); ci > 0 && (c <= 0 || ci < c) {
				c = ci
			}
		}
		if c > 0 && (capv == 0 || c < capv) {
			capv = c
		}
	}
	return capv
}

// maybeCollect starts a garbage collection when a resource measured by
// collections is stale while it matters: the resource is at Elevated or
// above and the Collect action is active, or the InFlight cap binds or
// nearly (a measurement that the cap rests on should be recent). One collection at a time, at most one per
// staleness period.
func (m *Manager) maybeCollect(now time.Time) {
	// The cap binds (it refused requests since the last step) or nearly
	// (the requests in flight are within a fifth of it).
	n := m.refusedInFlight()
	binding := m.capv > 0 && (n != m.lastCap || 5*m.InFlight() >= 4*m.capv)
	m.lastCap = n
	due := false
	for i := range m.res {
		rs := &m.res[i]
		if !rs.track.stale(rs.reading, now, m.cfg.staleAfter) {
			continue
		}
		if (m.active[Collect] && rs.level >= Elevated) || (binding && rs.r.Goal > 0) {
			due = true
		}
	}
	if !due || !m.collecting.CompareAndSwap(false, true) {
		return
	}
	for i := range m.res {
		if m.res[i].track.renewed {
			m.res[i].track.renewAt = now // wait a staleness period before the next
		}
	}
	go func() {
		defer m.collecting.Store(false)
		m.cfg.collect()
		m.collections.Add(1)
	}()
}

func (m *Manager) refusedInFlight() uint64 {
	var n uint64
	for c := range m.refused[RefuseInFlight] {
		n += m.refused[RefuseInFlight][c].Load()
	}
	return n
}

// stateLocked returns the actions' state at now.
func (m *Manager) stateLocked(now time.Time) State {
	s := State{Time: now, Until: now.Add(m.expiry), Level: m.level, Active: m.active,
		BodyLimit: m.cfg.bodyLimit, IdleTimeout: m.cfg.idle, HeaderTimeout: m.cfg.header}
	if m.active[Shed] {
		s.ShedFloor = m.cfg.floors[m.holds[Shed].level]
	}
	s.Cap = m.capv
	return s
}

// publish replaces the request path's gate with the state's.
func (m *Manager) publish() {
	s := &m.state
	if !s.Active[CriticalOnly] && !s.Active[LargeBodies] && s.Cap == 0 {
		m.gate.Store(nil)
		return
	}
	g := &gate{until: s.Until, criticalOnly: s.Active[CriticalOnly], bodyLimit: -1}
	if s.Active[LargeBodies] {
		g.bodyLimit = s.BodyLimit
	}
	for c := range levee.Criticality(levee.NumCriticalities) {
		g.caps[c] = math.MaxInt64
		if s.Cap > 0 && c != levee.CriticalPlus {
			g.caps[c] = s.Cap
			if r := c.Rank(); r < 2 {
				g.caps[c] = max(1, int64(float64(s.Cap)*m.cfg.shares[r]))
			}
		}
	}
	m.gate.Store(g)
}
