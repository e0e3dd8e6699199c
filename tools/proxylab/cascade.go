package proxylab

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/levee-dev/levee/internal/outbound"
	"github.com/levee-dev/levee/proxy"
	"github.com/levee-dev/levee/tools/load"
)

// CascadeConfig configures Cascade: the founding text's failover cascade
// on loopback. Zero fields take the defaults in brackets.
type CascadeConfig struct {
	// Proxy is RoleClassic or RoleLevee.
	Proxy string
	// Backends [3], each a Fixed process of Workers [10] × Hold [50ms]
	// (600 requests/s together: light enough for a 2-core machine to run
	// the clients and the proxy beside them).
	Backends int
	Workers  int
	Hold     time.Duration
	// Load is the offered rate as a multiple of the backends' total
	// capacity [1.2], for Duration [30s]; goodput is measured after
	// Warmup [5s].
	Load     float64
	Duration time.Duration
	Warmup   time.Duration
	// Retries [2] and Timeout [1s] of the naive clients (immediate
	// retries, a deadline per attempt), half CRITICAL, half SHEDDABLE.
	Retries int
	Timeout time.Duration
	// Kill, when set, SIGKILLs the first backend that long into the run;
	// Revive, when set too, restarts it on the same port then.
	Kill, Revive time.Duration
	// SlowStart is levee's slow-start window [10s].
	SlowStart time.Duration
}

func (c *CascadeConfig) defaults() {
	if c.Backends <= 0 {
		c.Backends = 3
	}
	if c.Workers <= 0 {
		c.Workers = 10
	}
	if c.Hold <= 0 {
		c.Hold = 50 * time.Millisecond
	}
	if c.Load <= 0 {
		c.Load = 1.2
	}
	if c.Duration <= 0 {
		c.Duration = 30 * time.Second
	}
	if c.Warmup <= 0 {
		c.Warmup = 5 * time.Second
	}
	if c.Retries <= 0 {
		c.Retries = 2
	}
	if c.Timeout <= 0 {
		c.Timeout = time.Second
	}
	if c.SlowStart <= 0 {
		c.SlowStart = 10 * time.Second
	}
}

// CascadeResult is what one Cascade run measured.
type CascadeResult struct {
	Proxy    string  `json:"proxy"`
	Capacity float64 `json:"capacity_rps"`
	Offered  float64 `json:"offered_rps"`
	// Goodput is the rate of successes completed after the warm-up;
	// GoodputRatio divides it by Capacity.
	Goodput      float64 `json:"goodput_rps"`
	GoodputRatio float64 `json:"goodput_ratio"`
	// Success of the requests offered, by criticality.
	CriticalSuccess  float64 `json:"critical_success"`
	SheddableSuccess float64 `json:"sheddable_success"`
	// Ejections counts backends taken out; MaxOut is the most out at once
	// (polled every 100 ms).
	Ejections int64 `json:"ejections"`
	MaxOut    int   `json:"max_out"`
	// Shares of the requests each backend served.
	Shares []float64 `json:"shares"`
	// With Kill: EjectedAfter is the time from the kill until the proxy
	// took the backend out (-1 if never); SentAfterEjection the attempts
	// the levee proxy sent it after that and before its revival;
	// ReturnedAfter the time from the revival until it was back in
	// rotation (-1 if never); RampPerSecond what it served in each second
	// after its revival.
	EjectedAfter      time.Duration `json:"ejected_after"`
	SentAfterEjection uint64        `json:"sent_after_ejection"`
	ReturnedAfter     time.Duration `json:"returned_after"`
	RampPerSecond     []int64       `json:"ramp_per_second,omitempty"`
	// P50 and P99 of the successes' latency.
	P50 float64 `json:"p50_s"`
	P99 float64 `json:"p99_s"`
	// Last is levee's last status seen (nil for the classic balancer).
	Last *proxy.Status `json:"last,omitempty"`
}

// Cascade runs the founding text's failover cascade on loopback: Backends
// Fixed processes behind the proxy c.Proxy (another process), offered
// c.Load × their capacity by naive retrying clients from this process.
func Cascade(ctx context.Context, c CascadeConfig) (*CascadeResult, error) {
	c.defaults()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var backs []*Proc
	var addrs []string
	defer func() {
		for _, b := range backs {
			b.Stop()
		}
	}()
	for range c.Backends {
		b, err := Start(ctx, Child{Role: RoleFixed, Workers: c.Workers, Hold: c.Hold, GOMAXPROCS: 1})
		if err != nil {
			return nil, err
		}
		backs = append(backs, b)
		addrs = append(addrs, b.Addr)
	}
	child := Child{Role: c.Proxy, Backends: addrs,
		Classic: ClassicConfig{HealthPath: "/healthz"}}
	if c.Proxy == RoleLevee {
		pc := proxy.DefaultConfig()
		pc.Health.Path = "/healthz"
		pc.Health.Every = time.Second
		pc.Balance.SlowStart = c.SlowStart
		child.Proxy = pc
	}
	px, err := Start(ctx, child)
	if err != nil {
		return nil, err
	}
	defer px.Stop()

	capacity := float64(c.Backends*c.Workers) / c.Hold.Seconds()
	res := &CascadeResult{Proxy: c.Proxy, Capacity: capacity, Offered: c.Load * capacity,
		EjectedAfter: -1, ReturnedAfter: -1}
	h, err := load.NewHTTP(load.HTTP{URL: "http://" + px.Addr + "/work", Client: load.ClientNaive,
		Retries: c.Retries, Timeout: c.Timeout})
	if err != nil {
		return nil, err
	}
	defer h.CloseIdleConnections()

	start := time.Now()
	poll := &poller{proxy: c.Proxy, addr: px.Addr, victim: addrs[0]}
	var wg sync.WaitGroup
	pctx, stopPoll := context.WithCancel(ctx)
	wg.Go(func() { poll.run(pctx, start) })
	var revived *Proc
	if c.Kill > 0 {
		wg.Go(func() {
			if outbound.Sleep(ctx, c.Kill) != nil {
				return
			}
			backs[0].Kill()
			poll.mark("kill", time.Since(start))
			if c.Revive <= c.Kill || outbound.Sleep(ctx, c.Revive-c.Kill) != nil {
				return
			}
			p, err := Start(ctx, Child{Role: RoleFixed, Listen: addrs[0], Workers: c.Workers, Hold: c.Hold, GOMAXPROCS: 1})
			if err != nil {
				poll.mark("revive failed: "+err.Error(), time.Since(start))
				return
			}
			poll.mark("revive", time.Since(start))
			revived = p
		})
	}
	lr, err := load.Run(ctx, load.Config{
		Phases: []load.Phase{{Name: "overload", Rate: res.Offered, Duration: c.Duration}},
		Do:     h.Func(),
		Mix:    load.Mix{Criticalities: []load.Share{{Name: "CRITICAL", Weight: 1}, {Name: "SHEDDABLE", Weight: 1}}},
		Drain:  2 * c.Timeout * time.Duration(c.Retries+1),
	})
	stopPoll()
	wg.Wait()
	if revived != nil {
		backs[0] = revived
	}
	if err != nil {
		return nil, err
	}
	res.Goodput = servedRate(lr, c.Warmup, c.Duration)
	res.GoodputRatio = res.Goodput / capacity
	if ph := lr.Phases[0]; len(ph.ByCriticality) == 2 {
		for _, cs := range ph.ByCriticality {
			s := float64(cs.Goodput) / float64(max(cs.Offered, 1))
			if cs.Name == "CRITICAL" {
				res.CriticalSuccess = s
			} else {
				res.SheddableSuccess = s
			}
		}
		res.P50, res.P99 = ph.Latency.P50, ph.Latency.P99
	}
	res.Ejections, res.MaxOut, res.Last = poll.ejections, poll.maxOut, poll.last
	if c.Kill > 0 {
		poll.failover(res)
	}
	var total float64
	var served []float64
	for i, b := range backs {
		st, err := fixedStats(b.Addr)
		if err != nil && i == 0 && c.Kill > 0 && c.Revive <= c.Kill {
			served = append(served, 0) // killed for good
			continue
		}
		if err != nil {
			return nil, err
		}
		if i == 0 && c.Kill > 0 && c.Revive > c.Kill {
			res.RampPerSecond = st.PerSecond
		}
		served = append(served, float64(st.Served))
		total += float64(st.Served)
	}
	for _, s := range served {
		res.Shares = append(res.Shares, s/max(total, 1))
	}
	return res, nil
}

// servedRate is the rate of successes completed in [from, to) of the run.
func servedRate(r *load.Result, from, to time.Duration) float64 {
	var n int64
	for i, b := range r.Series {
		at := time.Duration(i) * r.Resolution
		if at >= from && at < to {
			n += b.Served
		}
	}
	return float64(n) / (to - from).Seconds()
}

func fixedStats(addr string) (Stats, error) {
	var st Stats
	resp, err := http.Get("http://" + addr + StatsPath)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// poller watches the proxy every 100 ms: how many backends are out, and
// for levee the victim's state and the attempts sent to it.
type poller struct {
	proxy, addr, victim string

	mu        sync.Mutex
	ejections int64
	maxOut    int
	marks     map[string]time.Duration
	samples   []victimSample
	last      *proxy.Status
}

type victimSample struct {
	at       time.Duration
	out      bool   // the victim is out of rotation
	attempts uint64 // attempts to it that ended so far (levee)
	inFlight uint64 // attempts to it under way
}

func (p *poller) mark(what string, at time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.marks == nil {
		p.marks = map[string]time.Duration{}
	}
	p.marks[what] = at
}

func (p *poller) run(ctx context.Context, start time.Time) {
	client := &http.Client{Timeout: time.Second}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.sample(client, time.Since(start))
	}
}

func (p *poller) sample(client *http.Client, at time.Duration) {
	path := ClassicStatsPath
	if p.proxy == RoleLevee {
		path = proxy.DefaultConfig().StatusPath
	}
	resp, err := client.Get("http://" + p.addr + path)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.proxy != RoleLevee {
		var st ClassicStats
		if json.NewDecoder(resp.Body).Decode(&st) == nil {
			p.ejections, p.maxOut = st.Ejections, max(p.maxOut, st.Down)
		}
		return
	}
	var st proxy.Status
	if json.NewDecoder(resp.Body).Decode(&st) != nil {
		return
	}
	p.last = &st
	p.maxOut = max(p.maxOut, st.Ejected)
	var ej int64
	for _, b := range st.Backends {
		ej += int64(b.Ejections)
		if b.Address != p.victim || b.State == "draining" {
			continue
		}
		var n uint64
		for _, v := range b.Outcomes {
			n += v
		}
		p.samples = append(p.samples, victimSample{at: at, out: b.State == "ejected", attempts: n, inFlight: uint64(max(b.InFlight, 0))})
	}
	p.ejections = max(p.ejections, ej)
}

// failover fills in the kill's figures from the samples.
func (p *poller) failover(res *CascadeResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kill, ok := p.marks["kill"]
	if !ok {
		return
	}
	revive, revived := p.marks["revive"]
	var ejectedAt time.Duration = -1
	var atEjection uint64
	for _, s := range p.samples {
		if s.at < kill {
			continue
		}
		if ejectedAt < 0 && s.out {
			// Attempts under way at the ejection were sent before it.
			ejectedAt, atEjection = s.at, s.attempts+s.inFlight
		}
		if ejectedAt >= 0 && (!revived || s.at < revive) && s.attempts > atEjection {
			res.SentAfterEjection = s.attempts - atEjection
		}
		if revived && s.at >= revive && !s.out && res.ReturnedAfter < 0 && ejectedAt >= 0 {
			res.ReturnedAfter = s.at - revive
		}
	}
	if ejectedAt >= 0 {
		res.EjectedAfter = ejectedAt - kill
	}
}
