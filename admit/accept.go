package admit

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/internal/fairq"
)

// Ticket is an admitted request. Call Done (or DoneAt) once the work is
// finished; it feeds the service-time table and the downstream-overload
// counter. The zero Ticket's Done is a no-op. A Ticket is a small value: keep
// it in a variable and call Done on that variable.
type Ticket struct {
	c     *Controller
	start int64  // start of service (the controller's scale), if timed
	route uint64 // route hash
	// flags packs the degrade level (low 8 bits), done, real-clock start,
	// a run slot held, timed, the criticality (bits 12–13) and would
	// (dry-run): four fields keep a Ticket in registers on return.
	flags uint32
}

const (
	ticketDone  = 1 << 8
	ticketReal  = 1 << 9
	ticketSlot  = 1 << 10
	ticketTimed = 1 << 11 // measured for the route's service time
	ticketCrit  = 12      // shift of the criticality
	ticketCritM = 3 << ticketCrit
	ticketWould = 1 << 14 // dry-run: admitted, though it would have been rejected
	ticketAlone = 1 << 15 // started while the server was not busy (solo.go)
	ticketSolo  = 1 << 16 // measured on the real clock for the solo service time only (solo.go)
)

// Admit decides whether to start the request described by ctx (its
// levee.Call carries criticality, tenant and attempt; its deadline, the time
// left). It returns a Ticket, or a *levee.RejectedError (shared: do not
// modify) with Reason Deadline when ctx is done or its deadline cannot be
// met (the time left is below the route's learned service time, on strong
// evidence: see WithRoute), Quota when the tenant is over its
// quota, and Overloaded when the request falls in the part being shed.
// In dry-run (SetDryRun) it rejects nothing: such a request is admitted
// and counted in Snapshot.WouldReject instead.
//
// Admit reads the coarse clock that Run and every 16th Admit refresh
// (to within 10 ms when idle) instead of reading the clock itself. It takes
// no lock and does not allocate. While Run is active, one Admit in 16
// reads the clock itself and, when Run's timer has fallen more than two
// periods behind (a saturated process), runs the control step in its place
// (see Run). Without Run (never started, or its ctx done) every Admit
// reads the clock, and when no Step has run for a period, one Admit runs
// it: a Controller that nobody steps still protects, and says once
// in the log (WithLogger, else slog.Default) that Run is missing. A plan
// that no Step has refreshed for planLife (four periods) is no longer
// applied: nothing is shed on stale information.
func (c *Controller) Admit(ctx context.Context) (Ticket, error) {
	now := c.clock.Load()
	if now == 0 {
		now = c.unrun()
	}
	return c.admit(ctx, now, 0, true)
}

// AdmitAt is Admit at the given time, for virtual time. Pair it with
// Ticket.DoneAt and Step.
func (c *Controller) AdmitAt(ctx context.Context, now time.Time) (Ticket, error) {
	off := c.offset.Load()
	return c.admit(ctx, int64(now.Sub(c.origin))+off, off, false)
}

// prefixKeys returns the keys of the prefixes of addr that may be grouped
// (see WithPeerGroups), 0 for the others.
func (c *Controller) prefixKeys(addr netip.Addr) (l1, l2 uint64) {
	l1, l2 = fairq.PrefixKeys(c.seed, addr)
	g := c.cfg.groups
	if addr.Unmap().Is4() {
		if g&GroupIPv4 == 0 {
			l1 = 0
		}
		return l1, 0
	}
	if g&GroupIPv6Site == 0 {
		l1 = 0
	}
	if g&GroupIPv6ISP == 0 || l1 == 0 {
		l2 = 0
	}
	return l1, l2
}

// Odd multipliers giving independent-looking Weyl sequences for the
// samplers (the shedding fractions use the golden ratio).
const (
	tenantMul  = 0xD1B54A32D192ED03
	serviceMul = 0xAEF17502108EF2D9
)

// admit decides at now (the controller's scale, which includes off for an
// explicit time) whether to admit.
func (c *Controller) admit(ctx context.Context, now, off int64, real bool) (Ticket, error) {
	call := levee.CallFrom(ctx)
	cr := call.Criticality
	if !cr.Valid() {
		cr = levee.Critical
	}
	n := c.arrivals[cr].Add(1)
	if real && n%lateClockEvery == 0 && c.running.Load() {
		now = c.late()
	}
	if call.Attempt > 0 {
		c.retried.Add(1)
	}
	route, probe, rej, stage := c.decide(ctx, &call, cr, n, now, off)
	t := Ticket{c: c, route: route, flags: uint32(uint8(c.deg.Level())) | uint32(cr)<<ticketCrit}
	if rej != nil {
		if c.refuse(cr, rej.Reason) {
			if stage != 0 {
				c.shedBy[cr][stage].Add(1)
			}
			return Ticket{}, rej
		}
		if rej == c.errGone {
			// In dry-run a request whose time is up is refused all the
			// same (counted as a would-be rejection): its answer reaches
			// nobody.
			return Ticket{}, rej
		}
		t.flags |= ticketWould
	}
	if probe || (n*serviceMul)>>(64-serviceShift) == 0 {
		t.flags |= ticketTimed
		if real {
			t.flags |= ticketReal
			t.start = c.clk.now()
		} else {
			t.start = now
		}
	}
	return t, nil
}

// refuse counts a rejection of a request of criticality cr for reason and
// reports whether to reject it: in dry-run it is counted as one that
// would have been rejected, and the request goes on (see SetDryRun).
func (c *Controller) refuse(cr levee.Criticality, reason levee.Reason) bool {
	if c.dry.Load() {
		c.would[cr][reason].Add(1)
		return false
	}
	c.rejected[cr][reason].Add(1)
	return true
}

// decide runs the accept path's checks on the n-th request of
// criticality cr, in the order of sacrifice, and returns its route, whether
// it is admitted as a service-time probe, the rejection it gets (nil:
// admitted) and, for an overload rejection, the stage that decided it. It
// counts nothing but the tenant samples: the caller counts the rejection
// (refuse).
func (c *Controller) decide(ctx context.Context, call *levee.Call, cr levee.Criticality, n uint64, now, off int64) (route uint64, probe bool, rej *levee.RejectedError, stage Stage) {
	route = c.defRoute
	if c.routeFn != nil {
		route = fairq.Hash(c.seed, c.routeFn(ctx))
	}
	if ctx.Err() != nil {
		return route, false, c.errGone, 0
	}
	if dl, ok := ctx.Deadline(); ok {
		left := int64(dl.Sub(c.origin)) + off - now
		if left <= 0 {
			return route, false, c.errGone, 0
		}
		if c.routes.cannotMeet(route, left, now) {
			if n%probeEvery != 0 {
				return route, false, c.errDeadline, 0
			}
			probe = true // admitted anyway and measured: a wrong estimate heals
		}
	}
	cur := c.plan.Load()
	p := cur
	if p != nil && now > p.until {
		p = nil // not refreshed for planLife: shed nothing on stale information
	}
	if n%surgeEvery == 0 {
		if s := c.checkSurge(now, cur); s != nil {
			p = s
		}
	}
	var key, l1, l2 uint64
	if call.Tenant != "" {
		qs := c.quotas.Load()
		sampled := (n*tenantMul)>>(64-c.sampleShift.Load()) == 0
		listing := p != nil && p.hasTenants
		if sampled || listing || qs != nil {
			key = fairq.Key(fairq.Hash(c.seed, call.Tenant))
		}
		if (sampled || listing) && call.Peer.IsValid() && c.cfg.groups != 0 {
			l1, l2 = c.prefixKeys(call.Peer)
		}
		if sampled {
			switch {
			case l2 != 0:
				c.ring.Add3(fairq.ParentsSample(key, int(cr)), fairq.ParentSample(l1, 1, int(cr)), fairq.ParentSample(l2, 2, int(cr)))
			case l1 != 0:
				c.ring.Add2(fairq.ParentsSample(key, int(cr)), fairq.ParentSample(l1, 1, int(cr)))
			default:
				c.ring.Add(fairq.Sample(key, int(cr)))
			}
		}
		if qs != nil {
			if q := (*qs)[call.Tenant]; q != nil {
				if wait, ok := q.take(cr, now); !ok {
					return route, probe, &c.quotaTable[raIndex(time.Duration(wait))], 0
				}
			}
		}
		if rej := c.limitTenant(call.Tenant, cr, now); rej != nil {
			return route, probe, rej, 0
		}
	}
	if p != nil {
		if stage = p.shed(key, l1, l2, cr.Rank(), n, c.off, now, call.Attempt > 0); stage != 0 {
			return route, probe, c.overErr[cr].Load(), stage
		}
	}
	return route, probe, nil, 0
}

// Done reports that the admitted work finished with err: nil for success; a
// *levee.RejectedError of Reason Overloaded from a downstream call is
// counted as downstream overload; a context error means the caller gave
// up. Only the first call on a Ticket variable counts.
func (t *Ticket) Done(err error) {
	if t.c == nil || t.flags&ticketDone != 0 {
		return
	}
	var now int64
	if t.flags&ticketTimed != 0 {
		if t.flags&ticketReal != 0 {
			now = t.c.clk.now()
		} else {
			t.flags &^= ticketTimed // a virtual-time ticket finished in real time: learn nothing
		}
	}
	if t.flags&ticketSolo != 0 && now == 0 {
		now = t.c.clk.now()
	}
	t.finish(now, err)
}

// DoneAt is Done at the given time, for virtual time.
func (t *Ticket) DoneAt(now time.Time, err error) {
	if t.c == nil || t.flags&ticketDone != 0 {
		return
	}
	t.finish(t.c.mono(now), err)
}

func (t *Ticket) finish(now int64, err error) {
	t.flags |= ticketDone
	c := t.c
	c.completed.Add(1)
	if t.flags&ticketSlot != 0 {
		t.flags &^= ticketSlot
		c.runq.release()
	}
	if err != nil {
		if re, ok := err.(*levee.RejectedError); ok {
			if re.Reason == levee.Overloaded {
				c.downstream.Add(1)
			}
		} else if errors.Is(err, levee.ErrOverloaded) {
			c.downstream.Add(1)
		} else if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			c.gone.Add(1)
		}
		return
	}
	if t.flags&ticketTimed != 0 {
		c.routes.observe(t.route, now-t.start, now)
	}
	if t.flags&ticketAlone != 0 && t.flags&(ticketTimed|ticketSolo) != 0 {
		c.solo.observe(now - t.start)
	}
}

// Start marks the start of service: the route's service time is learned
// from here to Done. Admit marks it, and Wait again when the request
// waited in the run queue; an adapter calls Start once the work really
// begins, for example when the request body has been read, so that the
// time a slow sender takes to upload is not taken for service time. It is
// one branch for the 63 tickets in 64 that are not measured.
func (t *Ticket) Start() {
	if t.c != nil && t.flags&ticketDone == 0 && (t.flags&(ticketTimed|ticketReal) == ticketTimed|ticketReal || t.flags&ticketSolo != 0) {
		t.start = t.c.clk.now()
	}
}

// StartAt is Start at the given time, for virtual time (pair it with
// AdmitAt and DoneAt).
func (t *Ticket) StartAt(now time.Time) {
	if t.c != nil && t.flags&(ticketTimed|ticketDone) == ticketTimed && t.flags&ticketReal == 0 {
		t.start = t.c.mono(now)
	}
}

// Exclude says that this request's duration is not a service time — a
// stream, a long-poll, a hijacked or upgraded connection, anything whose
// length the caller rather than the work decides — so the route learns
// nothing from it. Done must still be called.
func (t *Ticket) Exclude() { t.flags &^= ticketTimed | ticketSolo }

// DegradeLevel returns the degradation level in force when the request was
// admitted; handlers choose their cheaper answer from it.
func (t *Ticket) DegradeLevel() degrade.Level { return degrade.Level(int8(uint8(t.flags))) }

// Wait blocks, if need be, until the admitted request may start: while the
// Controller bounds the requests running at once (see WithRunQueue), a
// request over the bound waits here, parked, in arrival order, and starts
// when an earlier one calls Done. It returns nil (start the work; Done
// frees the slot), or a *levee.RejectedError (shared: do not modify) and
// the request must not start: Reason Deadline when ctx ended while it
// waited or its time left fell below its route's service time, Overloaded
// when it waited longer than the run queue allows. The rejection is
// counted like one from Admit; call Done anyway or not, it is a no-op. In
// dry-run a wait ends only in a slot, or in a Deadline error when its
// caller has gone (counted in Snapshot.CallerGone): see the package
// documentation's "Dry-run".
//
// While the server is not busy Wait is one atomic load; otherwise the
// common case (nobody waiting, a slot free) is two atomic additions (one
// here, one in Done). It does not allocate unless it must wait. With the
// run queue off (WithRunQueue(0)), or for a ticket whose controller is
// only stepped on virtual time, Wait returns nil at once.
func (t *Ticket) Wait(ctx context.Context) error {
	c := t.c
	if c == nil || t.flags&(ticketDone|ticketSlot) != 0 || c.cfg.runWait <= 0 {
		return nil
	}
	q := &c.runq
	if !q.on() {
		if q.running.Load() == 0 {
			t.alone() // not busy, nothing left from a busy spell: the CPU is its own
		}
		return nil
	}
	if q.tryFast() {
		t.flags |= ticketSlot
		return nil
	}
	ok, timedOut := q.wait(ctx, c.clk.now())
	if !ok {
		if timedOut {
			return t.refuse(levee.Overloaded)
		}
		if c.dry.Load() {
			// Dry-run: the caller has gone while its request waited
			// behind requests live shedding would have refused; not a
			// decision live would make, so not counted as one.
			t.flags |= ticketDone
			c.gone.Add(1)
			return c.errGone
		}
		return t.refuse(levee.Deadline)
	}
	t.flags |= ticketSlot
	now := c.clk.now()
	// In dry-run the wait was behind requests live shedding would have
	// refused: no decision is made on it, the request runs.
	if dl, has := ctx.Deadline(); has && !c.dry.Load() {
		if left := int64(dl.Sub(c.origin)) - now; left <= 0 || c.routes.cannotMeet(t.route, left, now) {
			t.flags &^= ticketSlot
			q.release()
			return t.refuse(levee.Deadline)
		}
	}
	if t.flags&ticketReal != 0 {
		t.start = now // service time counts from the start, not the queue
	}
	return nil
}

// alone marks a ticket that starts while the server is not busy (the run
// queue off, and no request admitted in a busy spell still running),
// whose service time is then its own (solo.go). A ticket not
// measured already is measured for the solo service time when the last
// such measurement is soloEvery old on the coarse clock (while Run is
// active; a controller stepped on virtual time has none): enough samples
// for slow requests, whose one in 64 would be too few, and at most a few
// hundred clock reads a second at any rate.
func (t *Ticket) alone() {
	t.flags |= ticketAlone
	if t.flags&ticketTimed != 0 {
		return
	}
	c := t.c
	if coarse := c.clock.Load(); coarse != 0 && c.solo.claim(coarse) {
		t.start = c.clk.now()
		t.flags |= ticketSolo
	}
}

// refuse rejects the ticket, which holds no slot, at the run queue for
// reason: it returns the rejection, or in dry-run nil (the request runs,
// outside the bound, counted as one that would have been rejected: a
// wait expired by a Step just before dry-run was switched on).
func (t *Ticket) refuse(reason levee.Reason) error {
	c := t.c
	cr := levee.Criticality((t.flags & ticketCritM) >> ticketCrit)
	if !c.refuse(cr, reason) {
		t.flags |= ticketWould
		return nil
	}
	t.flags |= ticketDone
	if reason == levee.Overloaded {
		c.shedBy[cr][StageRunQueue].Add(1)
		return c.overErr[cr].Load()
	}
	return c.errDeadline
}
