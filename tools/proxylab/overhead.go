package proxylab

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

// OverheadConfig configures Overhead. Zero fields take the defaults in
// brackets.
type OverheadConfig struct {
	// Rate [1500/s] offered to each proxy for Duration [10s] per round,
	// Rounds [3] times, the order of the proxies rotating each round:
	// well below every proxy's saturation.
	Rate     float64
	Duration time.Duration
	Rounds   int
	// Nginx adds Debian's nginx as a peer (it must be installed).
	Nginx bool
}

// OverheadRow is one proxy's measurements, one per round.
type OverheadRow struct {
	Proxy string `json:"proxy"`
	// CPUPerRequest is the proxy process's CPU time over the round ÷ the
	// requests it answered.
	CPUPerRequest []time.Duration `json:"cpu_per_request"`
	// P50 and P99 latency, seconds, of each round (from the scheduled
	// send, through the proxy to a backend that answers at once).
	P50 []float64 `json:"p50_s"`
	P99 []float64 `json:"p99_s"`
	// Failed requests (should be 0 below saturation).
	Failed int64 `json:"failed"`
}

// Overhead measures, side by side in one run, the CPU per request and the
// latency of a bare httputil.ReverseProxy, levee's proxy (as the levee
// proxy command runs it: edge admission, limits, balancing, throttle,
// budget) and, with c.Nginx, nginx, each a process with one core
// (GOMAXPROCS=1, one nginx worker), in front of the same two trivial
// backends.
func Overhead(ctx context.Context, c OverheadConfig) ([]OverheadRow, error) {
	if c.Rate <= 0 {
		c.Rate = 1500
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
	}
	if c.Rounds <= 0 {
		c.Rounds = 3
	}
	var addrs []string
	for range 2 {
		b, err := Start(ctx, Child{Role: RoleFixed, Workers: 1 << 16})
		if err != nil {
			return nil, err
		}
		defer b.Stop()
		addrs = append(addrs, b.Addr)
	}
	type subject struct {
		row  *OverheadRow
		proc *Proc
	}
	var subjects []subject
	for _, role := range []string{RoleBare, RoleLevee} {
		p, err := Start(ctx, Child{Role: role, Backends: addrs, GOMAXPROCS: 1})
		if err != nil {
			return nil, err
		}
		defer p.Stop()
		subjects = append(subjects, subject{&OverheadRow{Proxy: role}, p})
	}
	if c.Nginx {
		p, err := StartNginx(ctx, addrs)
		if err != nil {
			return nil, err
		}
		defer p.Kill()
		subjects = append(subjects, subject{&OverheadRow{Proxy: "nginx"}, p})
	}
	for round := range c.Rounds {
		for i := range subjects {
			s := subjects[(i+round)%len(subjects)]
			if err := measure(ctx, c, s.row, s.proc); err != nil {
				return nil, fmt.Errorf("proxylab: %s: %w", s.row.Proxy, err)
			}
		}
	}
	rows := make([]OverheadRow, len(subjects))
	for i, s := range subjects {
		rows[i] = *s.row
	}
	return rows, nil
}

// measure offers c.Rate to p for c.Duration after a one-second warm-up and
// records its CPU per answered request and its latency.
func measure(ctx context.Context, c OverheadConfig, row *OverheadRow, p *Proc) error {
	h, err := load.NewHTTP(load.HTTP{URL: "http://" + p.Addr + "/x", Client: load.ClientNone, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer h.CloseIdleConnections()
	phase := func(d time.Duration) (*load.Result, error) {
		return load.Run(ctx, load.Config{Phases: []load.Phase{{Name: "steady", Rate: c.Rate, Duration: d}}, Do: h.Func()})
	}
	if _, err := phase(time.Second); err != nil {
		return err
	}
	before, err := p.CPU()
	if err != nil {
		return err
	}
	r, err := phase(c.Duration)
	if err != nil {
		return err
	}
	after, err := p.CPU()
	if err != nil {
		return err
	}
	ph := r.Phases[0]
	answered := ph.Goodput + ph.Rejected + ph.Failed
	if answered == 0 {
		return fmt.Errorf("no request answered")
	}
	row.CPUPerRequest = append(row.CPUPerRequest, (after-before)/time.Duration(answered))
	row.P50 = append(row.P50, ph.Latency.P50)
	row.P99 = append(row.P99, ph.Latency.P99)
	row.Failed += ph.Failed + ph.Rejected
	return nil
}
