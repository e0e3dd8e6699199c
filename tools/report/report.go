package report

import "math"

// Report is the outcome of one levee tool invocation: a simulation, a
// demo, a load test. Encoded with encoding/json it is the one report schema
// every tool prints with --json; a tool adds fields of its own only beside
// it (the simulator's scenario tables), never in place of these.
type Report struct {
	// Tool names the producer: "sim", "demo", "load attack", "load plan",
	// "load drill", "bench".
	Tool string `json:"tool"`
	// Scenario names what was run: a simulator scenario, the demo, a
	// target URL.
	Scenario    string `json:"scenario,omitempty"`
	Description string `json:"description,omitempty"`
	// Seed of a simulation: the same scenario and seed give the same bytes.
	Seed *uint64 `json:"seed,omitempty"`
	// DurationS is the length of the offered-load schedule, seconds.
	DurationS float64 `json:"duration_s"`
	// CapacityRPS is the capacity of the instances meant to serve when the
	// tool measured or configured one for the whole report (the demo's
	// closed-loop measurement); each run also states its own.
	CapacityRPS float64 `json:"capacity_rps,omitempty"`
	// Trigger names the phase after which recovery is measured.
	Trigger string `json:"trigger,omitempty"`
	Runs    []Run  `json:"runs"`
	// Notes are caveats about the measurement (generator lag, errors of the
	// generator itself, a run stopped early).
	Notes []string `json:"notes,omitempty"`
}

// Run is one run: one protection, one client model, one schedule.
type Run struct {
	Name string `json:"name"`
	// Protection of the servers: "none", "levee", or a peer's name.
	Protection string `json:"protection"`
	// Client names the client model: "naive" (per-attempt timeout,
	// immediate retries), "levee" (levee's client), "none" (no retries).
	Client string `json:"client,omitempty"`
	// Throttle says whether clients throttled adaptively.
	Throttle bool `json:"throttle,omitempty"`
	// CapacityRPS is the capacity of the instances meant to serve (the
	// seed's avalanche: 10000, not 20000); 0 when unknown.
	CapacityRPS float64 `json:"capacity_rps"`
	Phases      []Phase `json:"phases"`
	// Crashes counts the crashes the load caused; CrashEvents lists every
	// crash, those a scenario scheduled included.
	Crashes     int     `json:"crashes"`
	CrashEvents []Crash `json:"crash_events,omitempty"`
	// OutageS is Outage of Series: seconds with goodput below 10% of
	// offered.
	OutageS float64 `json:"outage_s"`
	// RecoveryS is Recovery of Series after the report's trigger; null if
	// goodput never came back or there is no trigger.
	RecoveryS *float64 `json:"recovery_s"`
	// WastedWorkShare is the share of the servers' work spent on requests
	// whose caller had already gone (timed out, cancelled, lost in a
	// crash): CPU time in the simulator, handler runs that finished after
	// their client's deadline on a real server. 0 when not measured.
	WastedWorkShare float64 `json:"wasted_work_share"`
	// RejectCPUShare is the share of the servers' CPU time spent
	// rejecting requests (simulator).
	RejectCPUShare float64 `json:"reject_cpu_share,omitempty"`
	// Attempts counts the attempts put on the wire over the run, retries
	// included, local throttling excluded.
	Attempts int64 `json:"attempts"`
	// GeneratorErrors counts requests a load generator could not send
	// (too many in flight, no port or file descriptor left); they are
	// counted as failed in the phases. MaxLagS is how far the arrival
	// process fell behind its schedule at worst. Either one non-zero makes
	// the run's latencies and failures overstated.
	GeneratorErrors int64   `json:"generator_errors,omitempty"`
	MaxLagS         float64 `json:"max_lag_s,omitempty"`
	// Stopped is set when the run was interrupted: the phases cover what
	// ran.
	Stopped   bool       `json:"stopped,omitempty"`
	Tiers     []Tier     `json:"tiers,omitempty"`
	Instances []Instance `json:"instances,omitempty"`
	Series    Series     `json:"series"`
}

// Rates are the outcomes of the requests offered over a span, per second of
// the span, in the vocabulary of DESIGN.md. Every offered request ends in
// exactly one of goodput, rejected, throttled and failed.
type Rates struct {
	// OfferedRPS: requests created by the arrival process.
	OfferedRPS float64 `json:"offered_rps"`
	// AttemptedRPS: attempts put on the wire, retries included.
	AttemptedRPS float64 `json:"attempted_rps"`
	// ThrottledRPS: requests a client refused locally.
	ThrottledRPS float64 `json:"throttled_rps"`
	// GoodputRPS: requests whose final outcome succeeded before the
	// client's deadline.
	GoodputRPS float64 `json:"goodput_rps"`
	// RejectedRPS: explicit levee rejections (429/503/504 with
	// Levee-Reject, or a levee rejection error).
	RejectedRPS float64 `json:"rejected_rps"`
	// FailedRPS: every other failure (timeouts, resets, crashes, plain
	// errors, late successes).
	FailedRPS float64 `json:"failed_rps"`
}

// Phase is a named segment of the offered-load schedule and what happened
// to the requests offered in it.
type Phase struct {
	Name   string  `json:"name"`
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	Rates
	// ByCriticality and ByTenant split the rates by class, for the classes
	// that were offered (criticalities shed first → last).
	ByCriticality []Class `json:"by_criticality,omitempty"`
	ByTenant      []Class `json:"by_tenant,omitempty"`
	// FailedBy splits FailedRPS by class of error: "timeout", "reset",
	// "refused", "status_5xx", "status_4xx", "other", "generator".
	FailedBy map[string]float64 `json:"failed_by,omitempty"`
	// Latency of the successful requests, from their scheduled send time
	// (no coordinated omission).
	Latency Latency `json:"latency_s"`
}

// Class is one criticality's or tenant's share of a phase.
type Class struct {
	Name string `json:"name"`
	Rates
}

// Latency summarises the latency of successful requests, in seconds; a
// field is 0 when the tool does not measure it or nothing succeeded.
type Latency struct {
	Mean float64 `json:"mean,omitempty"`
	P50  float64 `json:"p50,omitempty"`
	P90  float64 `json:"p90,omitempty"`
	P99  float64 `json:"p99,omitempty"`
	P999 float64 `json:"p999,omitempty"`
	Max  float64 `json:"max,omitempty"`
	// Quantiles is the distribution (from a histogram) where the tool
	// keeps one: the latency at each quantile Q (0..1).
	Quantiles []Quantile `json:"quantiles,omitempty"`
}

// Quantile is the latency S (seconds) at quantile Q (0..1) of a
// distribution.
type Quantile struct {
	Q float64 `json:"q"`
	S float64 `json:"s"`
}

// Crash is one crash of an instance.
type Crash struct {
	T        float64 `json:"t_s"`
	Instance string  `json:"instance"`
	// Kind is "memory" (in-flight over the memory limit), "health-check"
	// (killed for being slow) or "event" (scheduled by the scenario).
	Kind  string `json:"kind"`
	Cause string `json:"cause"`
	// ArrivalsRPS is the attempts that reached the instance in the second
	// before the crash; Inflight its in-flight requests when it crashed.
	ArrivalsRPS int `json:"arrivals_last_s"`
	Inflight    int `json:"inflight"`
}

// Tier is what reached a tier of instances behind one load balancer.
type Tier struct {
	Name        string  `json:"name"`
	ReceivedRPS float64 `json:"received_rps"`
	PeakRecvRPS float64 `json:"peak_received_rps"`
	Instances   int     `json:"instances"`
	Protected   bool    `json:"protected"`
	Received    int64   `json:"received"`
}

// Instance is one server's totals over the run.
type Instance struct {
	Name string `json:"name"`
	Site string `json:"site,omitempty"`
	// Received counts the attempts that reached it; Served those it
	// answered successfully; Rejected its explicit rejections.
	Received int64 `json:"received"`
	Served   int64 `json:"served"`
	Rejected int64 `json:"rejected"`
	// RejectedBy counts the rejections by reason (overloaded, quota,
	// deadline, …).
	RejectedBy map[string]int64 `json:"rejected_by,omitempty"`
	// Wasted counts the handler runs that finished after their client
	// had gone (measured on real servers).
	Wasted       int64   `json:"wasted,omitempty"`
	PeakRecvRPS  float64 `json:"peak_received_rps"`
	PeakInflight int     `json:"peak_inflight,omitempty"`
	Crashes      int     `json:"crashes"`
	// CPUS is the CPU time the instance used, seconds (real servers).
	CPUS float64 `json:"cpu_s,omitempty"`
}

// Series are a run's rates per bucket of BucketS seconds from the start of
// the schedule, for charts and for the derived figures (Recovery, Outage).
// Client-side rates count requests by the bucket they were offered in
// (the simulator: completed in).
type Series struct {
	BucketS      float64   `json:"bucket_s"`
	OfferedRPS   []float64 `json:"offered_rps"`
	AttemptedRPS []float64 `json:"attempted_rps"`
	ThrottledRPS []float64 `json:"throttled_rps"`
	GoodputRPS   []float64 `json:"goodput_rps"`
	RejectedRPS  []float64 `json:"rejected_rps"`
	FailedRPS    []float64 `json:"failed_rps"`
	// P99S is the p99 latency of the successes that completed in each
	// bucket, seconds (0: none); absent when not measured.
	P99S      []float64        `json:"p99_s,omitempty"`
	Instances []InstanceSeries `json:"instances,omitempty"`
}

// InstanceSeries is one server's state per bucket; a tool fills in what it
// measures and leaves the rest out.
type InstanceSeries struct {
	Name        string    `json:"name"`
	ReceivedRPS []float64 `json:"received_rps"`
	// ServedRPS counts successful answers; on a real server, those sent
	// before the client's deadline.
	ServedRPS   []float64 `json:"served_rps"`
	RejectedRPS []float64 `json:"rejected_rps"`
	// WastedRPS counts handler runs that finished after their client had
	// gone.
	WastedRPS   []float64 `json:"wasted_rps,omitempty"`
	Utilisation []float64 `json:"utilisation,omitempty"`
	Inflight    []float64 `json:"peak_inflight,omitempty"`
	// QueueDelayS is the worst mean wait for a core over the bucket's
	// control periods, seconds.
	QueueDelayS []float64 `json:"queue_delay_s,omitempty"`
	// ShedLevel is levee's highest shed level in the bucket (0 nothing …
	// 4 everything).
	ShedLevel []float64 `json:"shed_level,omitempty"`
	// State: 0 up, 1 cold (warming up), 2 down.
	State []int `json:"state,omitempty"`
}

// Phase returns the phase named name, and whether there is one.
func (r *Run) Phase(name string) (Phase, bool) {
	for _, p := range r.Phases {
		if p.Name == name {
			return p, true
		}
	}
	return Phase{}, false
}

// RecoveryAfter is Recovery of the run's Series after the phase named
// trigger; nil if there is no such phase or goodput never came back.
func (r *Run) RecoveryAfter(trigger string) *float64 {
	p, ok := r.Phase(trigger)
	if !ok {
		return nil
	}
	return Recovery(r.Series, p.StartS, p.EndS)
}

// Append adds next after r in time: next's phases follow r's (their
// times shifted by the end of r's last phase), its series starts there
// (r's series cut or padded with empty buckets to that point: r's drain
// gives way to next), its counts add to r's. Both series must have the
// same bucket width (an empty r takes next's). Runs measured apart, such
// as the steps of a capacity plan, then read as one. Instances, their
// series and the run-level figures other than the outage are left as r
// has them.
func (r *Run) Append(next Run) {
	offset := 0.0
	if n := len(r.Phases); n > 0 {
		offset = r.Phases[n-1].EndS
	}
	for _, p := range next.Phases {
		p.StartS, p.EndS = Round(p.StartS+offset), Round(p.EndS+offset)
		r.Phases = append(r.Phases, p)
	}
	r.Attempts += next.Attempts
	r.GeneratorErrors += next.GeneratorErrors
	r.MaxLagS = max(r.MaxLagS, next.MaxLagS)
	r.Stopped = r.Stopped || next.Stopped
	s, ns := &r.Series, next.Series
	if s.BucketS == 0 {
		s.BucketS = ns.BucketS
	}
	at := int(math.Round(offset / s.BucketS))
	join := func(a, b []float64) []float64 { return append(resize(a, at), b...) }
	s.OfferedRPS, s.AttemptedRPS, s.ThrottledRPS = join(s.OfferedRPS, ns.OfferedRPS), join(s.AttemptedRPS, ns.AttemptedRPS), join(s.ThrottledRPS, ns.ThrottledRPS)
	s.GoodputRPS, s.RejectedRPS, s.FailedRPS = join(s.GoodputRPS, ns.GoodputRPS), join(s.RejectedRPS, ns.RejectedRPS), join(s.FailedRPS, ns.FailedRPS)
	if s.P99S != nil || ns.P99S != nil {
		s.P99S = join(s.P99S, resize(ns.P99S, len(ns.OfferedRPS)))
	}
	r.OutageS = Outage(r.Series)
}

// resize returns xs cut or padded with zeros to n values.
func resize(xs []float64, n int) []float64 {
	if len(xs) >= n {
		return xs[:n:n]
	}
	return append(xs, make([]float64, n-len(xs))...)
}
