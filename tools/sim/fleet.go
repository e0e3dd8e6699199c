package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/fleet"
)

// FleetScenario is a fleet of instances enforcing tenants' fleet-wide
// quotas in CPU cost (package fleet) on virtual time. Every instance runs
// a real fleet.Limiter; they meet in a fleet.MemStore (the Redis store's
// rules in memory) reached with a round trip of RTT, every Period. Each
// tenant offers Poisson requests of exponentially distributed cost,
// spread by the load balancer over every instance, or, for sticky
// tenants, over a few; each request asks its instance's Limiter (Allow)
// and, if admitted, is charged its cost. The store may be unreachable for
// a while (Outage): exchanges then fail after the exchange timeout.
type FleetScenario struct {
	// Instances and Tenants size the fleet (default 100 and 1000).
	Instances, Tenants int
	// Duration of the run (default 60 s); Warmup is left out of the
	// steady-state figures (default 10 s).
	Duration, Warmup time.Duration
	// Period of the Limiters' rounds (default 1 s) and RTT the store's
	// round trip (default 1 ms).
	Period, RTT time.Duration
	// OverShare is the share of tenants offering more than their quota
	// (default 0.2): they offer 1.5 to 5 times it; the others 0.2 to 0.9.
	OverShare float64
	// StickyShare is the share of tenants whose requests all go to
	// StickyInstances instances (default 0.3 and 5); the others' requests
	// go to any instance.
	StickyShare     float64
	StickyInstances int
	// OutageFrom and OutageTo bound a time the store is unreachable
	// (both 0: none).
	OutageFrom, OutageTo time.Duration
	// Seed makes the run reproducible.
	Seed uint64
}

// DefaultFleetScenario is 100 instances and 1000 tenants for 60 s, the
// store lost from 30 s to 40 s.
func DefaultFleetScenario() FleetScenario {
	return FleetScenario{Instances: 100, Tenants: 1000, Duration: 60 * time.Second, OutageFrom: 30 * time.Second, OutageTo: 40 * time.Second}
}

func (s *FleetScenario) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&s.Instances, 100)
	def(&s.Tenants, 1000)
	def(&s.StickyInstances, 5)
	defD(&s.Duration, 60*time.Second)
	defD(&s.Warmup, 10*time.Second)
	defD(&s.Period, time.Second)
	defD(&s.RTT, time.Millisecond)
	if s.OverShare <= 0 {
		s.OverShare = 0.2
	}
	if s.StickyShare <= 0 {
		s.StickyShare = 0.3
	}
	s.StickyInstances = min(s.StickyInstances, s.Instances)
}

// FleetReport is what a FleetScenario showed. Usage ratios are a tenant's
// fleet-wide admitted cost per second ÷ its quota, over a window.
type FleetReport struct {
	Instances, Tenants int
	// Requests offered and admitted in the whole run.
	Offered, Admitted int64
	// Steady is the window after Warmup and before the outage (or the
	// end); Outage the outage after one lease TTL; After the time from
	// three periods after the outage to the end. Empty windows are zero.
	Steady, Outage, After FleetWindow
	// StoreClaimsPerSecond is the store's load: tenant entries updated
	// per second, over the run.
	StoreClaimsPerSecond float64
}

// FleetWindow summarises one window. A tenant is dense when, at its
// quota, each instance serving it sees at least one of its requests per
// second, sparse otherwise: a sparse tenant's quota is a fraction of a
// request per second per instance, which local buckets can only enforce
// on average over many seconds (each instance lets one request through
// and then holds the tenant until its share has paid for it).
type FleetWindow struct {
	From, To time.Duration
	// Dense over-quota tenants: the usage ratio's median, 5th and 95th
	// percentiles and maximum, and the share within ±10% of 1; the
	// medians of the sticky and the spread ones.
	OverTenants                        int
	OverP5, OverMedian, OverP95        float64
	OverMax, OverWithin10              float64
	OverStickyMedian, OverSpreadMedian float64
	// Sparse over-quota tenants: median and maximum usage ratio.
	SparseOverTenants               int
	SparseOverMedian, SparseOverMax float64
	// Under-quota tenants: the share of their requests refused, dense and
	// sparse.
	UnderTenants                     int
	UnderRefused, SparseUnderRefused float64
	// FleetUsage is the fleet's admitted cost per second (cores), and
	// Entitled Σ min(demand, quota).
	FleetUsage, Entitled float64
}

type simTenant struct {
	name    string
	quota   float64    // cores
	demand  float64    // cores offered
	cost    float64    // mean core-seconds per request
	over    bool       // offers more than its quota
	sticky  []int      // its instances, nil: any
	used    [3]float64 // admitted core-seconds per window
	offered [3]int64   // requests per window
	refused [3]int64
}

type simInstance struct {
	l        *fleet.Limiter
	next     time.Duration // next round
	r        *fleet.Round
	exchAt   time.Duration
	finishAt time.Duration
	err      error
}

// RunFleet runs s and reports what it showed. The same scenario gives the
// same report.
func RunFleet(s FleetScenario) (FleetReport, error) {
	s.defaults()
	rng := rand.New(rand.NewPCG(s.Seed, 0xF1EE7))
	var now time.Duration
	base := time.Unix(1_800_000_000, 0)
	store := fleet.NewMemStore(func() time.Time { return base.Add(now) })
	cfg := fleet.Config{Tenants: map[string]fleet.Quota{}}
	tenants := make([]simTenant, s.Tenants)
	var total float64 // requests per second
	cum := make([]float64, s.Tenants)
	for i := range tenants {
		t := &tenants[i]
		t.name = fmt.Sprintf("tenant-%04d", i)
		t.quota = 0.05 * math.Pow(100, rng.Float64()) // 0.05 … 5 cores
		t.cost = 0.01 * math.Pow(20, rng.Float64())   // 10 … 200 ms
		t.over = rng.Float64() < s.OverShare
		if t.over {
			t.demand = t.quota * (1.5 + 3.5*rng.Float64())
		} else {
			t.demand = t.quota * (0.2 + 0.7*rng.Float64())
		}
		if rng.Float64() < s.StickyShare {
			t.sticky = rng.Perm(s.Instances)[:s.StickyInstances]
		}
		cfg.Tenants[t.name] = fleet.Quota{Cores: t.quota}
		total += t.demand / t.cost
		cum[i] = total
	}
	insts := make([]*simInstance, s.Instances)
	for i := range insts {
		l, err := fleet.New(cfg, fleet.WithInstance(fmt.Sprintf("i%03d", i)), fleet.WithPeriod(s.Period),
			fleet.WithCPU(nil), fleet.WithInitialInstances(s.Instances))
		if err != nil {
			return FleetReport{}, err
		}
		insts[i] = &simInstance{l: l, next: time.Duration(rng.Int64N(int64(s.Period)))}
	}
	ttl := 3 * s.Period
	outEnd := s.OutageTo
	windows := [3][2]time.Duration{
		{s.Warmup, s.Duration},
		{s.OutageFrom + ttl, s.OutageTo},
		{s.OutageTo + 3*s.Period, s.Duration},
	}
	if s.OutageTo > s.OutageFrom {
		windows[0][1] = s.OutageFrom
	} else {
		windows[1], windows[2] = [2]time.Duration{}, [2]time.Duration{}
		outEnd = 0
	}
	down := func(t time.Duration) bool { return t >= s.OutageFrom && t < outEnd }
	errDown := errors.New("store unreachable")
	rep := FleetReport{Instances: s.Instances, Tenants: s.Tenants}
	var claims int64

	const step = time.Millisecond
	nextArrival := time.Duration(rng.ExpFloat64() / total * 1e9)
	for now = step; now <= s.Duration; now += step {
		for nextArrival < now {
			t := &tenants[sort.SearchFloat64s(cum, rng.Float64()*total)]
			var in *simInstance
			if t.sticky != nil {
				in = insts[t.sticky[rng.IntN(len(t.sticky))]]
			} else {
				in = insts[rng.IntN(len(insts))]
			}
			at := base.Add(nextArrival)
			rep.Offered++
			_, ok := in.l.Allow(t.name, levee.Critical, at)
			cost := rng.ExpFloat64() * t.cost
			for w, win := range windows {
				if nextArrival >= win[0] && nextArrival < win[1] {
					t.offered[w]++
					if ok {
						t.used[w] += cost
					} else {
						t.refused[w]++
					}
				}
			}
			if ok {
				rep.Admitted++
				in.l.Charge(t.name, "", time.Duration(cost*1e9))
			}
			nextArrival += time.Duration(rng.ExpFloat64() / total * 1e9)
		}
		for _, in := range insts {
			in.round(now, base, s, store, down, errDown, &claims)
		}
	}
	rep.StoreClaimsPerSecond = float64(claims) / s.Duration.Seconds()
	for w, win := range windows {
		rep.window(w, win, tenants, s.Instances)
	}
	return rep, nil
}

// round advances one instance's exchange: begin, the store's update at
// half the round trip, the answer at the full round trip (or the failure
// at the exchange timeout while the store is down).
func (in *simInstance) round(now time.Duration, base time.Time, s FleetScenario, store *fleet.MemStore,
	down func(time.Duration) bool, errDown error, claims *int64) {
	if in.r == nil && now >= in.next {
		in.next += s.Period
		in.r = in.l.BeginRound(base.Add(now))
		in.exchAt, in.finishAt, in.err = now+s.RTT/2, now+s.RTT, nil
		if down(now) {
			in.exchAt, in.finishAt, in.err = -1, now+s.Period/2, errDown
		}
	}
	if in.r == nil {
		return
	}
	if in.exchAt >= 0 && now >= in.exchAt {
		in.exchAt = -1
		*claims += int64(len(in.r.Claims))
		in.err = store.Exchange(context.Background(), in.r)
	}
	if now >= in.finishAt {
		in.l.FinishRound(base.Add(now), in.r, in.err)
		in.r = nil
	}
}

func (rep *FleetReport) window(w int, win [2]time.Duration, tenants []simTenant, instances int) {
	out := FleetWindow{From: win[0], To: win[1]}
	d := (win[1] - win[0]).Seconds()
	if d <= 0 {
		return
	}
	var over, sticky, spread, sparse []float64
	var refused, offered, sRefused, sOffered int64
	for i := range tenants {
		t := &tenants[i]
		use := t.used[w] / d
		out.FleetUsage += use
		out.Entitled += math.Min(t.demand, t.quota)
		serving := float64(instances)
		if t.sticky != nil {
			serving = float64(len(t.sticky))
		}
		dense := t.quota/t.cost/serving >= 1
		switch {
		case !dense && t.over:
			sparse = append(sparse, use/t.quota)
			continue
		case !dense:
			sRefused += t.refused[w]
			sOffered += t.offered[w]
			continue
		}
		if t.over {
			r := use / t.quota
			over = append(over, r)
			if t.sticky != nil {
				sticky = append(sticky, r)
			} else {
				spread = append(spread, r)
			}
			if math.Abs(r-1) <= 0.1 {
				out.OverWithin10++
			}
			continue
		}
		out.UnderTenants++
		refused += t.refused[w]
		offered += t.offered[w]
	}
	slices.Sort(over)
	slices.Sort(sticky)
	slices.Sort(spread)
	q := func(xs []float64, p float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		return xs[min(len(xs)-1, int(p*float64(len(xs))))]
	}
	out.OverTenants = len(over)
	out.OverP5, out.OverMedian, out.OverP95 = q(over, 0.05), q(over, 0.5), q(over, 0.95)
	if len(over) > 0 {
		out.OverMax = over[len(over)-1]
		out.OverWithin10 /= float64(len(over))
	}
	out.OverStickyMedian, out.OverSpreadMedian = q(sticky, 0.5), q(spread, 0.5)
	if offered > 0 {
		out.UnderRefused = float64(refused) / float64(offered)
	}
	if sOffered > 0 {
		out.SparseUnderRefused = float64(sRefused) / float64(sOffered)
	}
	slices.Sort(sparse)
	out.SparseOverTenants, out.SparseOverMedian = len(sparse), q(sparse, 0.5)
	if len(sparse) > 0 {
		out.SparseOverMax = sparse[len(sparse)-1]
	}
	switch w {
	case 0:
		rep.Steady = out
	case 1:
		rep.Outage = out
	default:
		rep.After = out
	}
}

// WriteFleetTable writes rep as a small text table.
func WriteFleetTable(w io.Writer, rep FleetReport) error {
	_, err := fmt.Fprintf(w, "fleet quotas: %d instances, %d tenants, %d requests offered, %d admitted; store %.0f tenant updates/s\n",
		rep.Instances, rep.Tenants, rep.Offered, rep.Admitted, rep.StoreClaimsPerSecond)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%-8s %-11s | dense over quota: %4s %6s %6s %6s %6s %5s %6s %6s | sparse: %4s %6s %6s | refused under: %7s %7s | %7s %8s\n",
		"window", "time", "n", "p5", "median", "p95", "max", "±10%", "sticky", "spread", "n", "median", "max", "dense", "sparse", "usage", "entitled")
	for _, x := range []struct {
		name string
		w    FleetWindow
	}{{"steady", rep.Steady}, {"outage", rep.Outage}, {"after", rep.After}} {
		if x.w.To <= x.w.From {
			continue
		}
		_, err = fmt.Fprintf(w, "%-8s %4.0f-%-4.0fs  |                   %4d %6.2f %6.2f %6.2f %6.2f %4.0f%% %6.2f %6.2f |         %4d %6.2f %6.2f |              %6.2f%% %6.2f%% | %7.1f %8.1f\n",
			x.name, x.w.From.Seconds(), x.w.To.Seconds(), x.w.OverTenants, x.w.OverP5, x.w.OverMedian, x.w.OverP95, x.w.OverMax,
			100*x.w.OverWithin10, x.w.OverStickyMedian, x.w.OverSpreadMedian, x.w.SparseOverTenants, x.w.SparseOverMedian, x.w.SparseOverMax,
			100*x.w.UnderRefused, 100*x.w.SparseUnderRefused, x.w.FleetUsage, x.w.Entitled)
		if err != nil {
			return err
		}
	}
	return nil
}
