package limits

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

// The process limits of LimitConfig.Kind.
const (
	// Goroutines: a goroutine ceiling of 1000 (pressure.WithGoroutineLimit).
	// Requests hold 4 KiB for 1 s, 200 a second; the attack holds 600
	// connections open without a request and raises the requests to 600 a
	// second: about 1800 goroutines unprotected.
	Goroutines = "goroutines"
	// Files: RLIMIT_NOFILE 256 in the server process. Requests hold 4 KiB
	// for 100 ms, 50 a second; the attack holds 450 connections open, 100
	// sending nothing and 350 part of a request head, as slow or hostile
	// clients do, each opened again as soon as the server closes it.
	Files = "files"
)

// LimitConfig is one run of the goroutine or descriptor lab: a normal
// load, an attack on the limit with the load raised, the normal load
// again.
type LimitConfig struct {
	Protection string
	Kind       string
	// Schedule is the length of the phases before, during and after the
	// attack. Default 4s, 10s, 6s.
	Schedule [3]time.Duration
}

// LimitLine is what one run of a limit lab measured.
type LimitLine struct {
	Protection, Kind string
	// MaxLevel is the overload manager's highest level; CriticalSteps the
	// steps it spent at Critical ("", 0 without it).
	MaxLevel      string
	CriticalSteps int64
	// PeakGoroutines is the server's highest goroutine count seen.
	PeakGoroutines int
	// ProbesOK and Probes count the health probes answered 200 within a
	// second during the attack, and all of them.
	ProbesOK, Probes int
	// AttackServed and AfterServed are the shares of the requests served
	// during the attack and from 2 s after it; Recovery the seconds from
	// the attack's end until every second serves ≥ 95% of its requests
	// (-1: never within the phase).
	AttackServed, AfterServed float64
	Recovery                  float64
	// Closed counts the attack's connections the server closed.
	Closed int64
	// Died and Panicked report the server's end; Log is what it logged.
	Died, Panicked bool
	Log            string  `json:"-"`
	Trace          []Stats `json:"-"`
}

// RunLimit runs one goroutine or descriptor lab with a fresh server
// process.
func RunLimit(ctx context.Context, cfg LimitConfig) (LimitLine, error) {
	if cfg.Schedule == ([3]time.Duration{}) {
		cfg.Schedule = [3]time.Duration{4 * time.Second, 10 * time.Second, 6 * time.Second}
	}
	line := LimitLine{Protection: cfg.Protection, Kind: cfg.Kind}
	total := cfg.Schedule[0] + cfg.Schedule[1] + cfg.Schedule[2]
	sc := ServerConfig{Protection: cfg.Protection, Limit: total + time.Minute, Alloc: 4 << 10}
	var normal, attacked float64
	var conns, partial int // connections held, of which sending part of a head
	switch cfg.Kind {
	case Goroutines:
		sc.Goroutines, sc.Hold = 1000, time.Second
		normal, attacked, conns = 200, 600, 600
	case Files:
		sc.NoFile, sc.Hold = 256, 100*time.Millisecond
		normal, attacked, conns, partial = 50, 50, 450, 350
	default:
		return line, fmt.Errorf("limits: unknown kind %q", cfg.Kind)
	}
	srv, err := Start(ctx, sc)
	if err != nil {
		return line, err
	}
	defer srv.Close()
	time.Sleep(time.Second) // a server starts before its traffic
	h, err := load.NewHTTP(load.HTTP{URL: "http://" + srv.Addr + "/work", Client: load.ClientNone, Timeout: 2 * time.Second})
	if err != nil {
		return line, err
	}
	defer h.CloseIdleConnections()

	w, stopWatch := startWatch(ctx, srv, 100*time.Millisecond)
	stopTrace := trace(ctx, srv, 250*time.Millisecond, &line.Trace)
	start := time.Now()
	attackAt, afterAt := start.Add(cfg.Schedule[0]), start.Add(cfg.Schedule[0]+cfg.Schedule[1])
	closed := make(chan int64, 2)
	for _, a := range []struct {
		n       int
		partial bool
	}{{conns - partial, false}, {partial, true}} {
		go func() {
			time.Sleep(time.Until(attackAt))
			actx, cancel := context.WithDeadline(ctx, afterAt)
			defer cancel()
			closed <- holdConns(actx, srv.Addr, a.n, a.partial)
		}()
	}
	res, err := load.Run(ctx, load.Config{
		Phases: []load.Phase{
			{Name: "before", Rate: normal, Duration: cfg.Schedule[0]},
			{Name: "attack", Rate: attacked, Duration: cfg.Schedule[1]},
			{Name: "after", Rate: normal, Duration: cfg.Schedule[2]},
		},
		Do:     h.Func(),
		Drain:  3 * time.Second,
		Limits: load.Limits{MaxRate: 10 * attacked, MaxDuration: total + time.Minute},
	})
	stopWatch()
	stopTrace()
	line.Closed = <-closed + <-closed
	if err != nil {
		return line, err
	}
	if st, err := srv.Stats(ctx); err == nil && st.Readings != nil {
		line.MaxLevel = overload.Level(st.MaxLevel).String()
		line.CriticalSteps = st.Levels[overload.Critical]
	}
	for _, st := range line.Trace {
		line.PeakGoroutines = max(line.PeakGoroutines, st.Goroutines)
	}
	line.Died, line.Panicked = !srv.Alive(), srv.Panicked()
	if err := srv.Close(); err != nil {
		line.Died = true
	}
	line.Log = srv.Stderr()
	line.Probes, line.ProbesOK = count(w.probes, attackAt, afterAt)
	if p := res.Phases; len(p) == 3 {
		if p[1].Offered > 0 {
			line.AttackServed = float64(p[1].Goodput) / float64(p[1].Offered)
		}
		after := goodputRate(res, cfg.Schedule[0]+cfg.Schedule[1]+2*time.Second, total)
		line.AfterServed = after / normal
	}
	line.Recovery = recovery(res, cfg.Schedule[0]+cfg.Schedule[1], total)
	return line, nil
}

// LimitTable renders the medians [min–max] of lines by protection, in
// the order given.
func LimitTable(lines []LimitLine, order []string) string {
	rows := []report.Figure[LimitLine]{
		{Label: "steps at the Critical level", Of: func(l LimitLine) float64 { return float64(l.CriticalSteps) }},
		{Label: "peak goroutines", Of: func(l LimitLine) float64 { return float64(l.PeakGoroutines) }},
		{Label: "health probes answered (attack)", Of: func(l LimitLine) float64 {
			if l.Probes == 0 {
				return 0
			}
			return float64(l.ProbesOK) / float64(l.Probes)
		}},
		{Label: "requests served (attack)", Of: func(l LimitLine) float64 { return l.AttackServed }},
		{Label: "requests served from 2 s after", Of: func(l LimitLine) float64 { return l.AfterServed }},
		{Label: "recovery after the attack (s, -1 never)", Of: func(l LimitLine) float64 { return l.Recovery }},
		{Label: "attack connections closed by the server", Of: func(l LimitLine) float64 { return float64(l.Closed) }},
		{Label: "died or panicked", Of: func(l LimitLine) float64 {
			if l.Died || l.Panicked {
				return 1
			}
			return 0
		}},
	}
	title := "limit lab"
	if len(lines) > 0 {
		title = lines[0].Kind + " lab (medians [min–max])"
	}
	return report.MedianTable(title, order, lines, func(l LimitLine) string { return l.Protection }, rows)
}
