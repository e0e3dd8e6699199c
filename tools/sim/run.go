package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/tools/report"
)

// Options tune a simulation run.
type Options struct {
	// Seed makes the run reproducible: the same scenario and seed give the
	// same Report, byte for byte once encoded.
	Seed uint64
	// Progress, if set, is called with the run name and the fraction of
	// virtual time done, about every 10%.
	Progress func(run string, frac float64)
	// Parallel runs the scenario's runs on up to this many goroutines;
	// 0 = GOMAXPROCS. The result does not depend on it.
	Parallel int
}

// Run simulates every run of the scenario and returns the report.
func Run(s *Scenario, opt Options) *Report {
	jobs := expand(s)
	seed := opt.Seed
	rep := &Report{Report: report.Report{
		Tool:        "sim",
		Scenario:    s.Name,
		Description: s.Description,
		Seed:        &seed,
		DurationS:   s.Duration().Seconds(),
		Trigger:     s.Trigger,
		Runs:        make([]report.Run, len(jobs)),
	}}
	par := opt.Parallel
	if par <= 0 {
		par = runtime.GOMAXPROCS(0)
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w := newWorld(j.s, j.run, opt.Seed)
			if opt.Progress != nil {
				name := j.run.Name
				w.progress = func(f float64) { opt.Progress(name, f) }
			}
			w.loop()
			rep.Runs[i] = w.result()
		}()
	}
	wg.Wait()
	switch s.Kind {
	case "throttle":
		rep.KTable = kTable(s, rep)
	case "amplification":
		rep.AmplificationTable = ampTable(s, jobs, rep)
	}
	return rep
}

type runJob struct {
	s   *Scenario
	run RunSpec
}

// expand lists the worlds to simulate: one per run, or for amplification
// scenarios one per (layers, run) with the generated chain.
func expand(s *Scenario) []runJob {
	if s.Kind != "amplification" {
		out := make([]runJob, len(s.Runs))
		for i, r := range s.Runs {
			out[i] = runJob{s, r}
		}
		return out
	}
	var out []runJob
	a := s.Amplification
	for _, l := range a.Layers {
		for _, r := range s.Runs {
			cs := chain(s, l)
			r.Layers = l
			r.Name = fmt.Sprintf("layers=%d/%s", l, r.Name)
			out = append(out, runJob{cs, r})
		}
	}
	return out
}

// chain builds the topology of an amplification scenario with l retrying
// layers: the clients and l−1 middle tiers, over the bottom tier.
func chain(s *Scenario, l int) *Scenario {
	cs := *s
	mid, bottom := s.Tiers[0], s.Tiers[1]
	attempts := s.Amplification.RetriesPerLayer + 1
	cs.Tiers = nil
	for i := 1; i < l; i++ {
		t := mid
		t.Name = fmt.Sprintf("%s-%d", mid.Name, i)
		d := Downstream{Target: bottom.Name}
		if mid.Downstream != nil {
			d = *mid.Downstream
			d.Target = bottom.Name
		}
		if i+1 < l {
			d.Target = fmt.Sprintf("%s-%d", mid.Name, i+1)
		}
		d.Retry.Attempts = attempts
		t.Downstream = &d
		cs.Tiers = append(cs.Tiers, t)
	}
	cs.Tiers = append(cs.Tiers, bottom)
	cs.Clients = append([]Client(nil), s.Clients...)
	target := bottom.Name
	if l > 1 {
		target = mid.Name + "-1"
	}
	for i := range cs.Clients {
		cs.Clients[i].Target = target
		cs.Clients[i].Retry.Attempts = attempts
	}
	cs.CapacityTier = bottom.Name
	return &cs
}

func seedFor(seed uint64, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64() ^ seed*0x9e3779b97f4a7c15
}

func newWorld(s *Scenario, run RunSpec, seed uint64) *world {
	w := &world{
		s:      s,
		run:    run,
		levee:  run.Protection == "levee",
		rng:    rand.New(rand.NewPCG(seed, seedFor(seed, run.Name))),
		byName: map[string]*tierRT{},
		period: int64(s.Levee.Period),
		bucket: int64(s.Bucket),
		end:    int64(s.Duration()),
	}
	w.thr = w.levee
	if run.Throttle != nil {
		w.thr = *run.Throttle
	}
	w.nb = int((w.end + w.bucket - 1) / w.bucket)
	for _, p := range []*[]int64{&w.offered, &w.attempted, &w.throttled, &w.goodput, &w.rejected, &w.failed} {
		*p = make([]int64, w.nb)
	}
	w.latSum = make([]float64, w.nb)
	var t int64
	for _, p := range s.Phases {
		t += int64(p.Duration)
		w.phaseEnd = append(w.phaseEnd, t)
	}
	w.scale = *s.Phases[0].Scale
	w.crit = make([][levee.NumCriticalities]report.Tally, len(s.Phases))
	for i := range s.Tiers {
		cfg := &s.Tiers[i]
		tr := &tierRT{
			cfg:       cfg,
			protect:   w.levee && *cfg.Protect,
			propagate: w.levee || (cfg.Downstream != nil && cfg.Downstream.PropagateDeadline),
			meanSvc:   float64(cfg.Service.Mean),
			recv:      make([]int64, w.nb),
		}
		sites := cfg.Sites
		if len(sites) == 0 {
			sites = []string{""}
		}
		for _, site := range sites {
			for k := 0; k < cfg.Instances; k++ {
				name := fmt.Sprintf("%s-%d", cfg.Name, k)
				if site != "" {
					name = fmt.Sprintf("%s-%s-%d", cfg.Name, site, k)
				}
				in := &instance{
					w: w, tier: tr, idx: len(tr.insts), gidx: len(w.insts),
					name: name, site: site, cores: max(1, int(math.Round(float64(cfg.Cores)*run.CapacityScale))),
					slow: 1, capF: 1,
					recv: make([]int32, w.nb), served: make([]int32, w.nb), rejected: make([]int32, w.nb),
					util: make([]float32, w.nb), inflightMax: make([]float32, w.nb), state: make([]uint8, w.nb),
					qdMax: make([]float32, w.nb),
				}
				in.head.next, in.head.prev = &in.head, &in.head
				in.rng = rand.New(rand.NewPCG(seed, seedFor(seed, "service/"+name)))
				tr.insts = append(tr.insts, in)
				w.insts = append(w.insts, in)
			}
		}
		w.tiers = append(w.tiers, tr)
		w.byName[cfg.Name] = tr
	}
	for _, in := range w.insts {
		w.startProcess(in)
	}
	for i := range s.Clients {
		c := &s.Clients[i]
		p := &population{cfg: c, idx: i, mix: c.critMix(), lane: &lane{d: -1}}
		p.rng = rand.New(rand.NewPCG(seed, seedFor(seed, "arrivals/"+c.Name)))
		w.lanes = append(w.lanes, p.lane)
		p.tenants = make([]string, c.Tenants)
		for k := range p.tenants {
			p.tenants[k] = fmt.Sprintf("%s-t%d", c.Name, k)
		}
		p.caller = w.newCaller(w.byName[c.Target], &c.Retry, c.Timeout.D(), p, c.ThrottleK)
		p.maxAtt = max(c.Retry.Attempts, 3, s.Levee.Attempts)
		p.ctxs = make([]context.Context, levee.NumCriticalities*len(p.tenants)*p.maxAtt)
		w.pops = append(w.pops, p)
	}
	// Downstream clients need the populations' tenants only through calls;
	// schedule the first events.
	for _, p := range w.pops {
		w.scheduleArrival(p)
	}
	for i := 1; i < len(s.Phases); i++ {
		w.at(w.phaseEnd[i-1], event{kind: evPhase, i: int32(i)})
	}
	w.at(w.period, event{kind: evControl})
	for i := range s.Events {
		w.at(int64(s.Events[i].At), event{kind: evScenario, i: int32(i)})
	}
	w.nextProg = w.end / 10
	return w
}

func (w *world) loop() {
	for {
		e, ok := w.next()
		if !ok || e.t >= w.end {
			break
		}
		w.now = e.t
		w.handle(e)
		if w.progress != nil && w.now >= w.nextProg {
			w.progress(float64(w.now) / float64(w.end))
			w.nextProg += w.end / 10
		}
	}
	w.now = w.end
}

func (w *world) handle(e event) {
	{
		switch e.kind {
		case evArrival:
			p := w.pops[e.i]
			if e.gen == p.gen {
				w.arrival(p)
			}
		case evAttemptTimer:
			if e.gen == e.c.gen && !e.c.done {
				w.timer(e.c)
			}
		case evRetry:
			if e.gen == e.c.gen && !e.c.done {
				w.unpause(e.c.parent)
				w.send(e.c)
			}
		case evServiceDone:
			if e.gen == e.j.gen {
				w.serviceDone(e.j)
			}
		case evControl:
			w.control()
			w.at(w.now+w.period, event{kind: evControl})
		case evScenario:
			w.scenarioEvent(int(e.i), true)
		case evEventEnd:
			w.scenarioEvent(int(e.i), false)
		case evRestart:
			in := w.insts[e.i]
			if e.gen == in.restartGen && in.crashed {
				w.restart(in)
			}
		case evPhase:
			w.phase = int(e.i)
			w.scale = *w.s.Phases[w.phase].Scale
			for _, p := range w.pops {
				p.gen++
				w.scheduleArrival(p)
			}
		}
	}
}

// control runs once per control period: it sets every instance's signals
// from the last period, steps its admission controller, runs health checks
// and samples the per-instance series.
func (w *world) control() {
	b := w.bkt(w.now - 1)
	ticksPerBucket := float32(w.bucket) / float32(w.period)
	for _, in := range w.insts {
		if in.crashed {
			in.state[b] = 2
			continue
		}
		acc := in.busyAcc + int64(in.busy)*(w.now-in.busyT)
		util := float64(acc-in.tickAcc) / (float64(in.cores) * float64(w.period))
		in.tickAcc = acc
		var qd float64
		switch {
		case in.qdN > 0:
			qd = float64(in.qdSum) / float64(in.qdN) / 1e9
		case in.qn > 0:
			qd = float64(w.now-in.q[in.qh].arrive) / 1e9
		}
		in.qdSum, in.qdN = 0, 0
		in.qdMax[b] = max(in.qdMax[b], float32(qd))
		if in.cpu != nil {
			in.cpu.SampleAt(at(w.now))
		}
		if in.qd != nil && w.now >= in.qdNext {
			in.qd.SampleAt(at(w.now))
			in.qdNext = w.now + max(int64(in.qd.Period()), w.period)
		}
		if in.conc != nil && w.now >= in.concNext {
			in.conc.SampleAt(at(w.now))
			in.concNext = w.now + max(int64(in.conc.Period()), w.period)
		}
		if in.ctrl != nil {
			in.ctrl.Step(at(w.now))
		}
		if in.ov != nil {
			in.ov.Step(at(w.now))
		}
		in.util[b] += float32(util) / ticksPerBucket
		in.inflightMax[b] = max(in.inflightMax[b], float32(in.inflight))
		if in.capacity() < 0.999 && in.state[b] == 0 {
			in.state[b] = 1
		}
		if k := in.tier.cfg.LB.KillSlow; k != nil && w.now%int64(k.Interval) < w.period {
			age := int64(0)
			if in.qn > 0 {
				age = w.now - in.q[in.qh].arrive
			}
			if age > int64(k.Latency) {
				in.strikes++
				if in.strikes >= k.Checks {
					w.crash(in, fmt.Sprintf("killed by health check: queueing delay %.2fs over %v for %d checks",
						float64(age)/1e9, k.Latency.D(), k.Checks), "health-check")
				}
			} else {
				in.strikes = 0
			}
		}
	}
}

func (w *world) scenarioEvent(i int, start bool) {
	e := &w.s.Events[i]
	for _, in := range w.byName[e.Tier].insts {
		if e.Site != "" && in.site != e.Site {
			continue
		}
		if e.Instance != nil && in.idx != *e.Instance {
			continue
		}
		switch e.Kind {
		case "slow":
			if start {
				in.slow = e.Factor
			} else {
				in.slow = 1
			}
		case "capacity":
			if start {
				in.capF = e.Factor
			} else {
				in.capF = 1
			}
		case "fail":
			if start {
				in.failUntil = never
				if e.Duration > 0 {
					in.failUntil = w.now + int64(e.Duration)
				}
			}
		case "crash":
			if start && !in.crashed {
				w.crash(in, "crashed by scenario event (site or machine lost)", "event")
				in.restartGen++ // the event's duration replaces the tier's restart delay
				if e.Duration > 0 {
					w.at(w.now+int64(e.Duration), event{kind: evRestart, i: int32(in.gidx), gen: in.restartGen})
				}
			}
		}
	}
	if start && e.Duration > 0 && (e.Kind == "slow" || e.Kind == "capacity") {
		w.at(w.now+int64(e.Duration), event{kind: evEventEnd, i: int32(i)})
	}
}
