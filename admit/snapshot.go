package admit

import (
	"context"
	"log/slog"
	"math"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/degrade"
)

// report is the last stage of a period: it keeps the Snapshot and turns
// state changes into events.
type report struct {
	snap   Snapshot
	level  degrade.Level // the degradation level after the last Step
	drill  bool          // a drill was in force at the last Step
	forced bool          // a drill's shed level was forced at the last Step
	dry    dryLog
}

// reportIn is what the other stages decided this period.
type reportIn struct {
	t                     time.Time
	now                   int64 // t on the controller's scale
	sec                   float64
	load                  float64
	level                 degrade.Level
	wasShedding, shedding bool
	shedLevel             float64
	admitFraction         float64
	share                 float64 // retry share
	capacity, fair        float64
	offered, tenantShed   float64
	noRetryChanged        bool
	dry                   bool
	would                 [levee.NumCriticalities][levee.NumReasons]uint64 // cumulative
	wouldShed             float64                                          // the plan's shed rate, reported in dry-run
	forced                [numFloors]*forcedShed                           // the floors in force, by floorSource
}

// step updates the snapshot and returns the period's events (none when
// nobody listens) and the dry-run line due.
func (r *report) step(c *Controller, in reportIn) stepOut {
	var out stepOut
	s := &r.snap
	s.Time = in.t
	s.Overloaded = in.shedding
	s.Load = finite(in.load)
	s.ShedLevel = finite(in.shedLevel)
	s.AdmitFraction = finite(in.admitFraction)
	s.DegradeLevel = in.level
	if in.wasShedding {
		s.ShedSeconds += in.sec
	}
	if r.level > 0 {
		s.DegradedSeconds += in.sec
	}
	s.RetryShare = finite(in.share)
	s.NoRetry = c.noRetry
	s.RetryAfter = c.overTable[0][c.retryIdx].RetryAfter
	s.CapacityRPS = finite(in.capacity)
	s.FairShareRPS = finite(in.fair)
	s.ActiveTenants = int(math.Round(c.tenants.units))
	s.TenantGroups = c.tenants.nGroups
	s.OfferedRPS = finite(in.offered)
	s.TenantShedRPS = finite(in.tenantShed)
	s.Routes = c.routes.routes()
	s.WouldShedRPS = 0
	if in.dry {
		s.WouldShedRPS = finite(in.wouldShed)
		out.dry = r.dry.step(in.now, in.would, s.WouldShedRPS)
	}
	s.ForcedShed, s.ForcedShedUntil = 0, time.Time{}
	if f := in.forced[drillFloor]; f != nil {
		s.ForcedShed, s.ForcedShedUntil = f.level, f.until
	}
	s.OverloadShed, s.OverloadShedUntil = 0, time.Time{}
	if f := in.forced[overloadFloor]; f != nil {
		s.OverloadShed, s.OverloadShedUntil = f.level, f.until
	}

	var events []Event
	if in.noRetryChanged {
		k := NoRetryEnd
		if c.noRetry {
			k = NoRetryStart
		}
		events = append(events, Event{Kind: k})
	}
	if in.shedding != in.wasShedding {
		k := OverloadEnd
		if in.shedding {
			k = OverloadStart
		}
		events = append(events, Event{Kind: k})
	}
	if in.level != r.level {
		events = append(events, Event{Kind: DegradeChanged})
	}
	_, _, drill := c.deg.Forced(in.t)
	if drill != r.drill {
		k := DrillEnd
		if drill {
			k = DrillStart
		}
		events = append(events, Event{Kind: k})
		r.drill = drill
	}
	if forced := in.forced[drillFloor] != nil; forced != r.forced {
		k := ForcedShedEnd
		if forced {
			k = ForcedShedStart
		}
		events = append(events, Event{Kind: k})
		r.forced = forced
	}
	r.level = in.level
	if len(events) == 0 || (c.cfg.observer == nil && c.cfg.logger == nil) {
		return out
	}
	snap := c.snapshotLocked()
	for i := range events {
		events[i].Time = in.t
		events[i].Snapshot = snap
	}
	out.events = events
	return out
}

// finite returns v, or 0 when it is NaN or infinite: a report never
// carries a value JSON cannot encode.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// Snapshot returns the state as of the last Step, with cumulative counters
// read now. Safe for concurrent use; it allocates the Signals slice.
func (c *Controller) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

func (c *Controller) snapshotLocked() Snapshot {
	s := c.report.snap
	s.Signals = append([]SignalState(nil), c.report.snap.Signals...)
	for cr := range levee.NumCriticalities {
		a := c.arrivals[cr].Load()
		var rej uint64
		for r := range levee.NumReasons {
			v := c.rejected[cr][r].Load()
			s.Rejected[cr][r] = v
			rej += v
		}
		if a > rej {
			s.Admitted[cr] = a - rej
		}
	}
	for cr := range levee.NumCriticalities {
		for r := range levee.NumReasons {
			s.WouldReject[cr][r] = c.would[cr][r].Load()
		}
		for st := range NumStages {
			s.Shed[cr][st] = c.shedBy[cr][st].Load()
		}
	}
	s.DryRun = c.dry.Load()
	s.DownstreamOverloaded = c.downstream.Load()
	s.CallerGone = c.gone.Load()
	s.Running, s.Waiting = int(c.runq.running.Load()), int(c.runq.waiting.Load())
	if b := c.runq.limit.Load(); b < runCount {
		s.RunBound = int(b)
	}
	return s
}

func (c *Controller) emit(e Event) {
	if c.cfg.observer != nil {
		c.cfg.observer(e)
	}
	l := c.cfg.logger
	if l == nil {
		return
	}
	s := &e.Snapshot
	switch e.Kind {
	case OverloadStart:
		l.Warn("admit: overloaded, shedding", "load", s.Load, "capacity_rps", s.CapacityRPS, "offered_rps", s.OfferedRPS)
	case OverloadEnd:
		l.Info("admit: overload over", "load", s.Load, "shed_seconds", s.ShedSeconds)
	case DegradeChanged:
		l.Info("admit: degradation level changed", "level", int(s.DegradeLevel), "load", s.Load)
	case DrillStart:
		l.Info("admit: degradation drill started", "level", int(s.DegradeLevel))
	case DrillEnd:
		l.Info("admit: degradation drill ended", "level", int(s.DegradeLevel))
	case NoRetryStart:
		l.Warn("admit: high retry share, rejections say no-retry", "retry_share", s.RetryShare)
	case NoRetryEnd:
		l.Info("admit: retry share back to normal", "retry_share", s.RetryShare)
	case ForcedShedStart:
		l.Info("admit: shed level forced", "level", s.ForcedShed, "until", s.ForcedShedUntil)
	case ForcedShedEnd:
		l.Info("admit: forced shed level ended", "shed_level", s.ShedLevel)
	default:
		l.Log(context.Background(), slog.LevelInfo, "admit: "+e.Kind.String())
	}
}
