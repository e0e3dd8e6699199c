package limits

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

// MemoryConfig is one run of the memory lab: a server with GOMEMLIMIT at
// Limit whose /work requests each hold Alloc bytes for Hold, offered
// Normal × what fits, then Surge × what fits, then Normal again. What
// fits is Limit ÷ Alloc requests in flight: Limit ÷ Alloc ÷ Hold a
// second (512 a second for 256 MiB, 1 MiB, 500 ms).
type MemoryConfig struct {
	Protection string
	Limit      int64         // default 256 MiB
	Alloc      int           // default 1 MiB
	Hold       time.Duration // default 500ms
	Normal     float64       // default 0.5
	Surge      float64       // default 3
	// Schedule is the length of the phases before, during and after the
	// surge. Default 5s, 20s, 10s.
	Schedule [3]time.Duration
	// Timeout is the clients' deadline (one attempt, no retry). Default 2s.
	Timeout time.Duration
}

func (c *MemoryConfig) defaults() {
	if c.Limit == 0 {
		c.Limit = 256 << 20
	}
	if c.Alloc == 0 {
		c.Alloc = 1 << 20
	}
	if c.Hold == 0 {
		c.Hold = 500 * time.Millisecond
	}
	if c.Normal == 0 {
		c.Normal = 0.5
	}
	if c.Surge == 0 {
		c.Surge = 3
	}
	if c.Schedule == ([3]time.Duration{}) {
		c.Schedule = [3]time.Duration{5 * time.Second, 20 * time.Second, 10 * time.Second}
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
}

// Fit returns the requests a second that fit in the limit.
func (c MemoryConfig) Fit() float64 {
	c.defaults()
	return float64(c.Limit) / float64(c.Alloc) / c.Hold.Seconds()
}

// Phase names of the memory lab.
const (
	PhaseNormal = "normal"
	PhaseSurge  = "surge"
	PhaseAfter  = "after"
)

// MemoryLine is what one run of the memory lab measured.
type MemoryLine struct {
	Protection string
	// PeakRSS is the server's highest resident set over the run,
	// SurgeRSS over the surge, both ÷ the limit.
	PeakRSS, SurgeRSS float64
	// GCShare is the garbage collector's share of the CPU available to
	// Go during the surge (pressure.GCCPU's measure).
	GCShare float64
	// Goodput is the successes a second of the surge from its second
	// second on ÷ what fits.
	Goodput float64
	// NormalServed is the share of the normal phase's requests served.
	NormalServed float64
	// Recovery is the seconds from the end of the surge until every
	// second of the after phase serves ≥ 95% of its offered requests
	// (-1: never within the phase).
	Recovery float64
	// ProbesOK and Probes count the health probes answered 200 within a
	// second, and all of them, over the whole run.
	ProbesOK, Probes int
	// MaxLevel is the overload manager's highest level ("" without it).
	MaxLevel string
	// Died and Panicked report the server's end; Log is what it logged
	// (the overload manager's and the admission controller's changes).
	Died, Panicked bool
	Log            string `json:"-"`
	// Stats is the server's last report of itself; Trace its reports
	// every 250 ms.
	Stats Stats   `json:"-"`
	Trace []Stats `json:"-"`
	// Load is the generator's result.
	Load *load.Result `json:"-"`
}

// RunMemory runs one memory lab with a fresh server process.
func RunMemory(ctx context.Context, cfg MemoryConfig) (MemoryLine, error) {
	cfg.defaults()
	line := MemoryLine{Protection: cfg.Protection, Recovery: -1}
	total := cfg.Schedule[0] + cfg.Schedule[1] + cfg.Schedule[2]
	srv, err := Start(ctx, ServerConfig{Protection: cfg.Protection, Alloc: cfg.Alloc, Hold: cfg.Hold, Limit: total + time.Minute},
		fmt.Sprintf("GOMEMLIMIT=%d", cfg.Limit))
	if err != nil {
		return line, err
	}
	defer srv.Close()
	h, err := load.NewHTTP(load.HTTP{URL: "http://" + srv.Addr + "/work", Client: load.ClientNone, Timeout: cfg.Timeout})
	if err != nil {
		return line, err
	}
	defer h.CloseIdleConnections()

	// A server starts before its traffic: a second idle, as after a
	// deployment, lets the overload manager see the process without
	// requests (its low point).
	time.Sleep(time.Second)
	w, stopWatch := startWatch(ctx, srv, 100*time.Millisecond)
	stopTrace := trace(ctx, srv, 250*time.Millisecond, &line.Trace)
	fit := cfg.Fit()
	start := time.Now()
	surgeAt, afterAt := start.Add(cfg.Schedule[0]), start.Add(cfg.Schedule[0]+cfg.Schedule[1])
	statsAt := make(chan Stats, 2)
	for _, at := range []time.Time{surgeAt, afterAt} {
		go func() {
			time.Sleep(time.Until(at))
			st, _ := srv.Stats(ctx)
			statsAt <- st
		}()
	}
	res, err := load.Run(ctx, load.Config{
		Phases: []load.Phase{
			{Name: PhaseNormal, Rate: cfg.Normal * fit, Duration: cfg.Schedule[0]},
			{Name: PhaseSurge, Rate: cfg.Surge * fit, Duration: cfg.Schedule[1]},
			{Name: PhaseAfter, Rate: cfg.Normal * fit, Duration: cfg.Schedule[2]},
		},
		Do:          h.Func(),
		MaxInFlight: 20000,
		Drain:       cfg.Timeout + time.Second,
		Limits:      load.Limits{MaxRate: 10 * cfg.Surge * fit, MaxDuration: total + time.Minute},
	})
	stopWatch()
	stopTrace()
	if err != nil {
		return line, err
	}
	line.Load = res
	s0, s1 := <-statsAt, <-statsAt
	if s0.CPUSeconds > s1.CPUSeconds {
		s0, s1 = s1, s0
	}
	if d := s1.CPUSeconds - s0.CPUSeconds; d > 0 {
		line.GCShare = (s1.GCSeconds - s0.GCSeconds) / d
	}
	if st, err := srv.Stats(ctx); err != nil {
		line.Log += "stats: " + err.Error() + "\n"
	} else {
		line.Stats = st
		if st.Readings != nil {
			line.MaxLevel = overload.Level(st.MaxLevel).String()
		}
	}
	line.Died, line.Panicked = !srv.Alive(), srv.Panicked()
	if err := srv.Close(); err != nil {
		line.Died = true
	}
	line.Log = srv.Stderr() + line.Log

	limit := float64(cfg.Limit)
	line.PeakRSS = peak(w.rss, start, start.Add(total+cfg.Timeout)) / limit
	line.SurgeRSS = peak(w.rss, surgeAt, afterAt) / limit
	line.Probes, line.ProbesOK = count(w.probes, start, start.Add(total))
	line.Goodput = goodputRate(res, cfg.Schedule[0]+time.Second, cfg.Schedule[0]+cfg.Schedule[1]) / fit
	if len(res.Phases) > 0 && res.Phases[0].Offered > 0 {
		line.NormalServed = float64(res.Phases[0].Goodput) / float64(res.Phases[0].Offered)
	}
	line.Recovery = recovery(res, cfg.Schedule[0]+cfg.Schedule[1], total)
	return line, nil
}

// goodputRate returns the successes a second among the requests
// scheduled in [from, to) since the run's start.
func goodputRate(r *load.Result, from, to time.Duration) float64 {
	if r.Resolution <= 0 || to <= from {
		return 0
	}
	var n int64
	for i, b := range r.Series {
		at := time.Duration(i) * r.Resolution
		if at >= from && at < to {
			n += b.Goodput
		}
	}
	return float64(n) / (to - from).Seconds()
}

// recovery returns the seconds from trigger until every whole second up
// to end has ≥ 95% of its offered requests served (by their scheduled
// time), -1 when none does.
func recovery(r *load.Result, trigger, end time.Duration) float64 {
	if r.Resolution <= 0 {
		return -1
	}
	per := int(time.Second / r.Resolution)
	first := int(trigger / r.Resolution)
	last := min(int(end/r.Resolution), len(r.Series))
	ok := func(i int) bool { // the second starting at bucket i
		var off, good int64
		for _, b := range r.Series[i:min(i+per, last)] {
			off += b.Offered
			good += b.Goodput
		}
		return off == 0 || float64(good) >= 0.95*float64(off)
	}
	rec := -1
	for i := last - per; i >= first; i-- {
		if !ok(i) {
			break
		}
		rec = i
	}
	if rec < 0 {
		return -1
	}
	return (time.Duration(rec-first) * r.Resolution).Seconds()
}

// MemoryTable renders the medians [min–max] of lines by protection, in
// the order given.
func MemoryTable(lines []MemoryLine, order []string) string {
	rows := []report.Figure[MemoryLine]{
		{Label: "peak RSS ÷ GOMEMLIMIT (whole run)", Of: func(l MemoryLine) float64 { return l.PeakRSS }},
		{Label: "peak RSS ÷ GOMEMLIMIT (surge)", Of: func(l MemoryLine) float64 { return l.SurgeRSS }},
		{Label: "GC share of the CPU (surge)", Of: func(l MemoryLine) float64 { return l.GCShare }},
		{Label: "goodput (surge, from 1 s) ÷ what fits", Of: func(l MemoryLine) float64 { return l.Goodput }},
		{Label: "served before the surge", Of: func(l MemoryLine) float64 { return l.NormalServed }},
		{Label: "recovery after the surge (s, -1 never)", Of: func(l MemoryLine) float64 { return l.Recovery }},
		{Label: "health probes failed", Of: func(l MemoryLine) float64 { return float64(l.Probes - l.ProbesOK) }},
	}
	return report.MedianTable("memory lab (medians [min–max])", order, lines, func(l MemoryLine) string { return l.Protection }, rows)
}
