package admit

import (
	"log/slog"
	"time"

	"github.com/levee-dev/levee"
)

// Dry-run.
//
// In dry-run every decision Admit makes is made as usual and none is
// enforced: a request that would be rejected (its deadline unmeetable,
// over its quota, in the part shed for overload or by a forced shed
// level) is admitted, and counted in Snapshot.WouldReject by criticality
// and reason instead of Snapshot.Rejected. Live, the first check that
// refuses a request ends it; in dry-run the request goes on without the
// later checks, so each would-be rejection is counted once, with the
// reason it would have got, and uses no quota token or plan budget that
// live shedding would not have used. One refusal stays: a request whose
// time is already up (its caller gone, its deadline passed) is refused
// as usual and counted as a would-be rejection, since its answer reaches
// nobody and running it would only take the server's time.
//
// The run queue keeps bounding and ordering what runs, every request
// included, but never ends a wait in a rejection: a wait ends when a slot
// frees, or when the caller goes away (counted in Snapshot.CallerGone).
// Its own rejections are not counted, as they cannot be computed: the
// queue holds the requests live shedding would have refused, and live it
// would not. Bounding what runs is what keeps an overloaded server able to
// see its overload in dry-run: with every request running at once, a
// CPU-bound server reads new requests only as fast as it finishes old
// ones, and the demand beyond that waits in the kernel, where no
// admission controller counts it. With the run queue off
// (WithRunQueue(0)), a saturated CPU-bound server in dry-run sees and
// counts about its capacity, not its demand.
//
// The control loop cannot steer by its signals while nothing is shed:
// they stay above target whatever it decides, and a level integrated from
// them would run to "shed everything". So in dry-run it estimates: the
// capacity is the one learned before the overload (below target, from
// what was admitted and what the signals read) and frozen while the
// signals are above target, where admissions say nothing about it; what it
// would shed is the offered rate minus that capacity (Snapshot.WouldShedRPS),
// mapped onto tenants and criticalities exactly as live shedding would
// be (the same plan, applied to the same requests, counted instead of
// enforced). Without a capacity learned below target first, the estimate
// is the admitted rate divided by the load, which a saturated signal
// makes too high.
//
// While would-be rejections grow, one line a second at most is logged,
// "admit: dry-run: would reject", with the counts per criticality and
// reason since the previous line and the estimated rate.

// SetDryRun switches dry-run on or off (see WithDryRun and the package
// documentation's "Dry-run"). It takes effect for the next Admit and
// Ticket.Wait; the control loop switches its estimate at the next Step.
// A change is logged (WithLogger). Safe for concurrent use; it does not take the
// Controller's lock.
func (c *Controller) SetDryRun(on bool) {
	if c.dry.Swap(on) != on && c.cfg.logger != nil {
		msg := "admit: dry-run off: rejecting"
		if on {
			msg = "admit: dry-run on: nothing is rejected, would-be rejections are counted"
		}
		c.cfg.logger.Info(msg)
	}
}

// DryRun reports whether the Controller is in dry-run.
func (c *Controller) DryRun() bool { return c.dry.Load() }

// logger returns the logger of WithLogger, else slog.Default(): for what
// an operator must see even without one (Run missing, dry-run).
func (c *Controller) logger() *slog.Logger {
	if c.cfg.logger != nil {
		return c.cfg.logger
	}
	return slog.Default()
}

// dryLogEvery is the shortest interval between two "would reject" lines.
const dryLogEvery = time.Second

// dryLog keeps what the last "would reject" line reported.
type dryLog struct {
	at     int64 // when (the controller's scale); 0: never
	logged [levee.NumCriticalities][levee.NumReasons]uint64
}

// dryLine is one "would reject" line, logged after the Step's lock is
// released.
type dryLine struct {
	since time.Duration
	delta [levee.NumCriticalities][levee.NumReasons]uint64
	rate  float64 // would-shed estimate, requests per second
}

// step returns the line to log at now, given the cumulative would-be
// rejections, or nil: when they have not grown, or the last line is less
// than dryLogEvery old.
func (d *dryLog) step(now int64, would [levee.NumCriticalities][levee.NumReasons]uint64, rate float64) *dryLine {
	if d.at != 0 && now-d.at < int64(dryLogEvery) {
		return nil
	}
	l := &dryLine{rate: rate, since: time.Duration(now - d.at)}
	grew := false
	for cr := range would {
		for r := range would[cr] {
			if would[cr][r] > d.logged[cr][r] {
				l.delta[cr][r] = would[cr][r] - d.logged[cr][r]
				grew = true
			}
		}
	}
	if !grew {
		return nil
	}
	if d.at == 0 {
		l.since = 0
	}
	d.at, d.logged = now, would
	return l
}

// log writes the line: the interval, the rate, and per criticality the
// counts by reason (only those that grew).
func (l *dryLine) log(lg *slog.Logger) {
	attrs := []any{"would_shed_rps", l.rate}
	if l.since > 0 {
		attrs = append(attrs, "interval", l.since.Round(time.Millisecond))
	}
	for _, cr := range levee.Criticalities() {
		var by []any
		for r := range levee.NumReasons {
			if n := l.delta[cr][r]; n > 0 {
				by = append(by, levee.Reason(r).String(), n)
			}
		}
		if by != nil {
			attrs = append(attrs, slog.Group(cr.String(), by...))
		}
	}
	lg.Warn("admit: dry-run: would reject", attrs...)
}
