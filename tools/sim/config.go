package sim

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/levee-dev/levee"
	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written in YAML as a Go duration string
// ("1s", "800us", "2m").
type Duration time.Duration

// UnmarshalYAML parses a Go duration string; a bare number is seconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &ParseError{Line: n.Line, Msg: "want a duration such as 1s or 800us"}
	}
	s := strings.TrimSpace(n.Value)
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 || v > 1e6 || math.IsNaN(v) {
			return &ParseError{Line: n.Line, Msg: fmt.Sprintf("duration %q out of range [0, 1e6] seconds", s)}
		}
		*d = Duration(v * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &ParseError{Line: n.Line, Msg: fmt.Sprintf("bad duration %q (want e.g. 1s, 800us)", s)}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Scenario is one simulated system and the runs to compare on it. It is
// decoded from YAML (see the committed scenarios) by Parse.
type Scenario struct {
	// Name identifies the scenario in reports.
	Name string `yaml:"name"`
	// Description says in a sentence or two what the scenario shows.
	Description string `yaml:"description"`
	// Kind adds a scenario-specific table: "" (none), "throttle" (k_table)
	// or "amplification" (amplification_table; the topology is built from
	// Amplification).
	Kind string `yaml:"kind"`
	// Bucket is the width of the report's time series; default 1s.
	Bucket Duration `yaml:"bucket"`
	// CapacityRPS is the capacity of the instances meant to serve (the
	// seed's avalanche: 10000, not 20000). 0 = the sum over CapacityTier's
	// instances of cores / mean service time.
	CapacityRPS float64 `yaml:"capacity_rps"`
	// CapacityTier names the tier whose capacity is reported; default the
	// last tier.
	CapacityTier string `yaml:"capacity_tier"`
	// Phases are the named segments of the offered-load schedule, in order.
	Phases []Phase `yaml:"phases"`
	// Trigger names the phase whose end starts the recovery clock.
	Trigger string `yaml:"trigger"`
	// Clients are the request populations.
	Clients []Client `yaml:"clients"`
	// Tiers are the server tiers, each behind its own load balancer.
	Tiers []Tier `yaml:"tiers"`
	// Events change the system at given times (slowdowns, crashes, ...).
	Events []Event `yaml:"events"`
	// Levee configures levee's protection in runs whose protection is levee.
	Levee Levee `yaml:"levee"`
	// Amplification describes the retry chains of an amplification scenario.
	Amplification *Amplification `yaml:"amplification"`
	// Runs are the variants compared on the same system.
	Runs []RunSpec `yaml:"runs"`

	lines map[string]int // YAML path -> line, for error messages
}

// Phase is a named segment of the offered-load schedule.
type Phase struct {
	// Name identifies the phase in reports; unique.
	Name string `yaml:"name"`
	// Duration of the phase; positive.
	Duration Duration `yaml:"duration"`
	// Scale multiplies every client's RateRPS during the phase; default 1.
	Scale *float64 `yaml:"scale"`
}

// Client is a population of clients sending requests to a tier.
type Client struct {
	// Name identifies the population; default "clients-N".
	Name string `yaml:"name"`
	// RateRPS is the mean arrival rate (Poisson) before the phase's scale.
	RateRPS float64 `yaml:"rate_rps"`
	// Target names the tier the requests go to.
	Target string `yaml:"target"`
	// Timeout is the request's overall deadline; default 1s.
	Timeout Duration `yaml:"timeout"`
	// Criticality maps criticality names (CRITICAL_PLUS, CRITICAL,
	// SHEDDABLE_PLUS, SHEDDABLE or 4..1) to weights; default all CRITICAL.
	Criticality map[string]float64 `yaml:"criticality"`
	// Tenants is the number of tenants sharing the traffic equally; default 1.
	Tenants int `yaml:"tenants"`
	// Retry is how the client retries when unprotected.
	Retry Retry `yaml:"retry"`
	// ThrottleK is the throttle's K when the run throttles; default 2.
	ThrottleK float64 `yaml:"throttle_k"`
}

// Retry describes a caller's retries.
type Retry struct {
	// Attempts counts the first attempt too; 1 = no retries; default 1.
	Attempts int `yaml:"attempts"`
	// Backoff is "fixed" or "exponential" (naive: no jitter, no budget);
	// default fixed.
	Backoff string `yaml:"backoff"`
	// Base is the fixed wait or the exponential base; default 0.
	Base Duration `yaml:"base"`
	// Cap caps exponential backoff; default 10s.
	Cap Duration `yaml:"cap"`
	// AttemptTimeout is how long one attempt may take; default the timeout.
	AttemptTimeout Duration `yaml:"attempt_timeout"`
}

// Tier is a set of identical instances behind one load balancer.
type Tier struct {
	// Name identifies the tier; its instances are NAME-i or NAME-SITE-i.
	Name string `yaml:"name"`
	// Instances per site (or in all when Sites is empty); default 1.
	Instances int `yaml:"instances"`
	// Sites splits the tier over named sites, Instances each.
	Sites []string `yaml:"sites"`
	// Cores is the number of requests served in parallel; default 1.
	Cores int `yaml:"cores"`
	// Service is the CPU time one request needs.
	Service Dist `yaml:"service"`
	// RejectCost is the CPU time of a rejection, as a fraction of the mean
	// service time; default 0.02.
	RejectCost *float64 `yaml:"reject_cost"`
	// Queue bounds the requests waiting for a core; beyond it a request is
	// refused at once (connection refused). 0 = unbounded.
	Queue int `yaml:"queue"`
	// MemoryLimit is the maximum in-flight (queued, running, waiting on
	// downstream) requests; one more and the instance crashes. 0 = none.
	MemoryLimit int `yaml:"memory_limit"`
	// Restart is how long a crashed instance stays down; default 5s.
	Restart Duration `yaml:"restart"`
	// ColdStart is the reduced capacity after a restart.
	ColdStart ColdStart `yaml:"cold_start"`
	// LB is how the tier's load balancer routes.
	LB LB `yaml:"lb"`
	// Downstream is a call made by every request to a lower tier after
	// its own CPU work.
	Downstream *Downstream `yaml:"downstream"`
	// Protect says whether levee's admit guards these instances in levee
	// runs; default true.
	Protect *bool `yaml:"protect"`
}

// Dist is a service-time distribution.
type Dist struct {
	// Kind is "exp" (default), "const" or "lognormal".
	Kind string `yaml:"dist"`
	// Mean service time at full capacity; positive.
	Mean Duration `yaml:"mean"`
	// CV is the coefficient of variation of a lognormal; default 1.
	CV float64 `yaml:"cv"`
}

// ColdStart is the reduced capacity of a freshly started instance.
type ColdStart struct {
	// Factor is the capacity right after the restart (0..1]; default 1.
	Factor float64 `yaml:"factor"`
	// Duration is how long it takes to warm up linearly to full capacity.
	Duration Duration `yaml:"duration"`
}

// LB is a load balancer's routing.
type LB struct {
	// Policy is "round_robin" (default), "least_inflight" or "failover"
	// (active/standby: the first instance that is up, in order).
	Policy string `yaml:"policy"`
	// Saturated is the queue length at which failover moves traffic to the
	// next instance; 0 = only when down.
	Saturated int `yaml:"saturated"`
	// KillSlow enables health checks that kill slow instances.
	KillSlow *KillSlow `yaml:"kill_slow"`
}

// KillSlow kills an instance whose queueing delay stays above Latency for
// Checks consecutive health checks Interval apart.
type KillSlow struct {
	// Latency is the queueing delay (age of the oldest queued request)
	// above which a check fails.
	Latency Duration `yaml:"latency"`
	// Checks is the number of consecutive failed checks that kill; default 3.
	Checks int `yaml:"checks"`
	// Interval between checks; default 1s.
	Interval Duration `yaml:"interval"`
}

// Downstream is a call from a tier to a lower one.
type Downstream struct {
	// Target names the lower tier.
	Target string `yaml:"target"`
	// Timeout of the whole call when the caller's deadline is not
	// propagated; default 1s.
	Timeout Duration `yaml:"timeout"`
	// PropagateDeadline passes the caller's deadline (and cancellation)
	// down when unprotected; levee runs always do.
	PropagateDeadline bool `yaml:"propagate_deadline"`
	// Retry is how the tier retries its downstream calls when unprotected.
	Retry Retry `yaml:"retry"`
}

// Event changes the system at a point of virtual time.
type Event struct {
	// At is when the event starts.
	At Duration `yaml:"at"`
	// Kind: "slow" (service time × Factor), "capacity" (capacity × Factor),
	// "crash" (down for Duration, then a cold start; 0 = for good), "fail"
	// (every request fails at once for Duration, 0 = until the end).
	Kind string `yaml:"kind"`
	// Tier, and optionally Site or Instance (index within the tier), name
	// the instances affected.
	Tier     string `yaml:"tier"`
	Site     string `yaml:"site"`
	Instance *int   `yaml:"instance"`
	// Factor of a slow or capacity event.
	Factor float64 `yaml:"factor"`
	// Duration of the event; 0 = until the end of the run.
	Duration Duration `yaml:"duration"`
}

// Levee configures levee's protection for levee runs.
type Levee struct {
	// CPUTarget is the target of the instance's CPU signal (pressure.CPU,
	// fed with the instance's busy core-time); default pressure's (0.95).
	CPUTarget float64 `yaml:"cpu_target"`
	// QueueDelayTarget is the target of the queueing-delay signal
	// (pressure.QueueDelay, observing each request's wait for a core);
	// default pressure's (learned: 100 × the CPU per request per core,
	// scaled by the spread of the service time);
	// negative disables the signal.
	QueueDelayTarget Duration `yaml:"queue_delay_target"`
	// Concurrency says whether the instance has the concurrency signal
	// (pressure.Concurrency: each admitted request's time in the
	// instance, its downstream calls included, and the deadline budget
	// its caller sent); default true, as in pressure.Default.
	Concurrency *bool `yaml:"concurrency"`
	// Period is admit's control period; default 50ms.
	Period Duration `yaml:"period"`
	// Attempts of a levee retry policy; default the retry package's.
	Attempts int `yaml:"attempts"`
}

// Amplification describes an amplification scenario: for each number of
// layers, a chain of that many retrying layers (the client and the tiers
// above the bottom) over a bottom tier that fails every request.
type Amplification struct {
	// Layers lists the chain lengths to simulate (1..6).
	Layers []int `yaml:"layers"`
	// RetriesPerLayer each layer makes (attempts − 1); default 2.
	RetriesPerLayer int `yaml:"retries_per_layer"`
	// Measure is the phase over which amplification is measured.
	Measure string `yaml:"measure"`
}

// RunSpec is one variant of the scenario.
type RunSpec struct {
	// Name identifies the run; default its protection.
	Name string `yaml:"name"`
	// Protection is "none" or "levee".
	Protection string `yaml:"protection"`
	// Throttle turns client-side adaptive throttling on or off; default on
	// for levee runs.
	Throttle *bool `yaml:"throttle"`
	// ThrottleK overrides every client's K.
	ThrottleK float64 `yaml:"throttle_k"`
	// MemoryLimitScale and TimeoutScale scale every memory limit and every
	// client timeout (sweeps); default 1.
	MemoryLimitScale float64 `yaml:"memory_limit_scale"`
	TimeoutScale     float64 `yaml:"timeout_scale"`
	// CapacityScale scales every tier's cores (rounded, at least 1);
	// default 1.
	CapacityScale float64 `yaml:"capacity_scale"`
	// Layers is set on generated amplification runs.
	Layers int `yaml:"-"`
}

// Duration returns the scenario's total duration.
func (s *Scenario) Duration() time.Duration {
	var d time.Duration
	for _, p := range s.Phases {
		d += p.Duration.D()
	}
	return d
}

// Parse decodes and validates a scenario from YAML. Its errors are
// *ParseError values that name the line and the field as the YAML wrote
// them, never a Go type; an unknown field is rejected with the closest
// known one suggested.
func Parse(data []byte) (*Scenario, error) {
	return ParseFile("", data)
}

// ParseFile is Parse for the contents of the file name, which its errors
// name ("scenario.yaml:12: …").
func ParseFile(name string, data []byte) (*Scenario, error) {
	s, err := decode(data)
	if pe, ok := err.(*ParseError); ok {
		pe.File = name
	}
	return s, err
}

func decode(data []byte) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(err)
	}
	if len(root.Content) == 0 {
		return nil, &ParseError{Msg: "empty scenario"}
	}
	if err := checkNode(root.Content[0], reflect.TypeFor[Scenario](), ""); err != nil {
		return nil, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		// checkNode saw every field and every scalar; what is left is
		// worded by yaml, without its Go type names.
		return nil, syntaxError(err)
	}
	s.lines = map[string]int{}
	indexLines(root.Content[0], "", s.lines)
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func indexLines(n *yaml.Node, path string, m map[string]int) {
	if _, ok := m[path]; !ok {
		m[path] = n.Line
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			p := k
			if path != "" {
				p = path + "." + k
			}
			m[p] = n.Content[i].Line
			indexLines(n.Content[i+1], p, m)
			m[p] = n.Content[i].Line
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			indexLines(c, path+"["+strconv.Itoa(i)+"]", m)
		}
	}
}

// errAt builds a validation error naming the line of path (or of its
// closest ancestor present in the YAML).
func (s *Scenario) errAt(path, format string, args ...any) error {
	e := &ParseError{Field: path, Msg: fmt.Sprintf(format, args...)}
	for p := path; p != ""; {
		if l, ok := s.lines[p]; ok {
			e.Line = l
			break
		}
		if i := strings.LastIndexAny(p, ".["); i >= 0 {
			p = p[:i]
		} else {
			p = ""
		}
	}
	return e
}

const maxInstances = 1000

func (s *Scenario) validate() error {
	if s.Name == "" {
		return s.errAt("name", "missing scenario name")
	}
	switch s.Kind {
	case "", "throttle", "amplification":
	default:
		return s.errAt("kind", "unknown kind %q (want throttle, amplification or nothing)", s.Kind)
	}
	if s.Bucket == 0 {
		s.Bucket = Duration(time.Second)
	}
	if s.Bucket.D() < time.Millisecond {
		return s.errAt("bucket", "bucket %v below 1ms", s.Bucket.D())
	}
	if len(s.Phases) == 0 {
		return s.errAt("phases", "at least one phase is needed")
	}
	phases := map[string]bool{}
	for i := range s.Phases {
		p := &s.Phases[i]
		at := fmt.Sprintf("phases[%d]", i)
		if p.Name == "" {
			return s.errAt(at, "phase without a name")
		}
		if phases[p.Name] {
			return s.errAt(at+".name", "duplicate phase %q", p.Name)
		}
		phases[p.Name] = true
		if p.Duration.D() <= 0 {
			return s.errAt(at+".duration", "phase %q needs a positive duration", p.Name)
		}
		if p.Scale == nil {
			one := 1.0
			p.Scale = &one
		}
		if *p.Scale < 0 || math.IsNaN(*p.Scale) || *p.Scale > 1e4 {
			return s.errAt(at+".scale", "scale %v out of range [0, 10000]", *p.Scale)
		}
	}
	if s.Duration() > 2*time.Hour {
		return s.errAt("phases", "scenario longer than 2h")
	}
	if s.Trigger != "" && !phases[s.Trigger] {
		return s.errAt("trigger", "no phase named %q", s.Trigger)
	}
	if s.Levee.CPUTarget < 0 || s.Levee.CPUTarget > 1 {
		return s.errAt("levee.cpu_target", "cpu_target %v out of (0, 1]", s.Levee.CPUTarget)
	}
	if s.Levee.QueueDelayTarget > Duration(time.Minute) {
		return s.errAt("levee.queue_delay_target", "queue_delay_target above 1m")
	}
	if s.Levee.Period == 0 {
		s.Levee.Period = Duration(50 * time.Millisecond)
	}
	if s.Levee.Period.D() < 10*time.Millisecond || s.Levee.Period.D() > time.Minute {
		return s.errAt("levee.period", "period out of [10ms, 1m]")
	}
	tiers := map[string]*Tier{}
	total := 0
	for i := range s.Tiers {
		t := &s.Tiers[i]
		at := fmt.Sprintf("tiers[%d]", i)
		if t.Name == "" {
			return s.errAt(at, "tier without a name")
		}
		if tiers[t.Name] != nil {
			return s.errAt(at+".name", "duplicate tier %q", t.Name)
		}
		tiers[t.Name] = t
		if t.Instances == 0 {
			t.Instances = 1
		}
		n := t.Instances * max(1, len(t.Sites))
		if t.Instances < 0 || n > maxInstances {
			return s.errAt(at+".instances", "instances %d out of [1, %d]", t.Instances, maxInstances)
		}
		total += n
		if t.Cores == 0 {
			t.Cores = 1
		}
		if t.Cores < 0 || t.Cores > 4096 {
			return s.errAt(at+".cores", "cores %d out of [1, 4096]", t.Cores)
		}
		if err := s.checkDist(&t.Service, at+".service"); err != nil {
			return err
		}
		if t.RejectCost == nil {
			v := 0.02
			t.RejectCost = &v
		}
		if *t.RejectCost < 0 || *t.RejectCost > 1 {
			return s.errAt(at+".reject_cost", "reject_cost %v out of [0, 1]", *t.RejectCost)
		}
		if t.Queue < 0 || t.MemoryLimit < 0 {
			return s.errAt(at, "negative queue or memory_limit")
		}
		if t.Restart == 0 {
			t.Restart = Duration(5 * time.Second)
		}
		if t.ColdStart.Factor == 0 {
			t.ColdStart.Factor = 1
		}
		if t.ColdStart.Factor < 0.01 || t.ColdStart.Factor > 1 {
			return s.errAt(at+".cold_start.factor", "factor %v out of [0.01, 1]", t.ColdStart.Factor)
		}
		switch t.LB.Policy {
		case "":
			t.LB.Policy = "round_robin"
		case "round_robin", "least_inflight", "failover":
		default:
			return s.errAt(at+".lb.policy", "unknown policy %q (want round_robin, least_inflight or failover)", t.LB.Policy)
		}
		if k := t.LB.KillSlow; k != nil {
			if k.Latency <= 0 {
				return s.errAt(at+".lb.kill_slow.latency", "latency must be positive")
			}
			if k.Checks <= 0 {
				k.Checks = 3
			}
			if k.Interval <= 0 {
				k.Interval = Duration(time.Second)
			}
		}
		if t.Protect == nil {
			v := true
			t.Protect = &v
		}
	}
	if total == 0 && s.Kind != "amplification" {
		return s.errAt("tiers", "at least one tier is needed")
	}
	for i := range s.Tiers {
		t := &s.Tiers[i]
		at := fmt.Sprintf("tiers[%d].downstream", i)
		if d := t.Downstream; d != nil {
			if tiers[d.Target] == nil {
				return s.errAt(at+".target", "no tier named %q", d.Target)
			}
			if d.Timeout == 0 {
				d.Timeout = Duration(time.Second)
			}
			if err := s.checkRetry(&d.Retry, d.Timeout, at+".retry"); err != nil {
				return err
			}
		}
	}
	// Downstream calls must not loop.
	for i := range s.Tiers {
		seen := map[string]bool{}
		for t := &s.Tiers[i]; t != nil && t.Downstream != nil; t = tiers[t.Downstream.Target] {
			if seen[t.Name] {
				return s.errAt(fmt.Sprintf("tiers[%d].downstream", i), "downstream calls loop through %q", t.Name)
			}
			seen[t.Name] = true
		}
	}
	if len(s.Clients) == 0 {
		return s.errAt("clients", "at least one client population is needed")
	}
	for i := range s.Clients {
		c := &s.Clients[i]
		at := fmt.Sprintf("clients[%d]", i)
		if c.Name == "" {
			c.Name = fmt.Sprintf("clients-%d", i)
		}
		if c.RateRPS <= 0 || c.RateRPS > 1e7 {
			return s.errAt(at+".rate_rps", "rate_rps %v out of (0, 1e7]", c.RateRPS)
		}
		if s.Kind != "amplification" && tiers[c.Target] == nil {
			return s.errAt(at+".target", "no tier named %q", c.Target)
		}
		if c.Timeout == 0 {
			c.Timeout = Duration(time.Second)
		}
		if c.Timeout < 0 {
			return s.errAt(at+".timeout", "negative timeout")
		}
		for name, w := range c.Criticality {
			if _, err := levee.ParseCriticality(name); err != nil {
				return s.errAt(at+".criticality."+name, "unknown criticality %q", name)
			}
			if w < 0 || math.IsNaN(w) {
				return s.errAt(at+".criticality."+name, "negative weight")
			}
		}
		if c.Tenants == 0 {
			c.Tenants = 1
		}
		if c.Tenants < 0 || c.Tenants > 10000 {
			return s.errAt(at+".tenants", "tenants %d out of [1, 10000]", c.Tenants)
		}
		if err := s.checkRetry(&c.Retry, c.Timeout, at+".retry"); err != nil {
			return err
		}
		if c.ThrottleK == 0 {
			c.ThrottleK = 2
		}
		if c.ThrottleK < 1 || c.ThrottleK > 100 {
			return s.errAt(at+".throttle_k", "throttle_k %v out of [1, 100]", c.ThrottleK)
		}
	}
	for i := range s.Events {
		e := &s.Events[i]
		at := fmt.Sprintf("events[%d]", i)
		switch e.Kind {
		case "slow", "capacity":
			if e.Factor <= 0 {
				return s.errAt(at+".factor", "%s needs a positive factor", e.Kind)
			}
		case "crash", "fail":
		default:
			return s.errAt(at+".kind", "unknown event kind %q (want slow, capacity, crash or fail)", e.Kind)
		}
		t := tiers[e.Tier]
		if t == nil {
			return s.errAt(at+".tier", "no tier named %q", e.Tier)
		}
		if e.Site != "" && !contains(t.Sites, e.Site) {
			return s.errAt(at+".site", "tier %q has no site %q", e.Tier, e.Site)
		}
		if e.Instance != nil && (*e.Instance < 0 || *e.Instance >= t.Instances*max(1, len(t.Sites))) {
			return s.errAt(at+".instance", "tier %q has no instance %d", e.Tier, *e.Instance)
		}
		if e.At < 0 || e.Duration < 0 {
			return s.errAt(at, "negative time")
		}
	}
	if s.Kind == "amplification" {
		a := s.Amplification
		if a == nil || len(a.Layers) == 0 {
			return s.errAt("amplification", "an amplification scenario needs amplification.layers")
		}
		for i, l := range a.Layers {
			if l < 1 || l > 6 {
				return s.errAt(fmt.Sprintf("amplification.layers[%d]", i), "layers %d out of [1, 6]", l)
			}
		}
		if a.RetriesPerLayer == 0 {
			a.RetriesPerLayer = 2
		}
		if len(s.Tiers) != 2 {
			return s.errAt("tiers", "an amplification scenario has two tier templates: a middle tier and the bottom")
		}
		if a.Measure != "" && !phases[a.Measure] {
			return s.errAt("amplification.measure", "no phase named %q", a.Measure)
		}
	}
	if len(s.Runs) == 0 {
		s.Runs = []RunSpec{{Name: "none", Protection: "none"}, {Name: "levee", Protection: "levee"}}
	}
	names := map[string]bool{}
	for i := range s.Runs {
		r := &s.Runs[i]
		at := fmt.Sprintf("runs[%d]", i)
		switch r.Protection {
		case "none", "levee":
		case "":
			r.Protection = "none"
		default:
			return s.errAt(at+".protection", "unknown protection %q (want none or levee)", r.Protection)
		}
		if r.Name == "" {
			r.Name = r.Protection
		}
		if names[r.Name] {
			return s.errAt(at+".name", "duplicate run %q", r.Name)
		}
		names[r.Name] = true
		if r.ThrottleK != 0 && (r.ThrottleK < 1 || r.ThrottleK > 100) {
			return s.errAt(at+".throttle_k", "throttle_k %v out of [1, 100]", r.ThrottleK)
		}
		if r.MemoryLimitScale == 0 {
			r.MemoryLimitScale = 1
		}
		if r.TimeoutScale == 0 {
			r.TimeoutScale = 1
		}
		if r.CapacityScale == 0 {
			r.CapacityScale = 1
		}
		if r.CapacityScale < 0 || r.CapacityScale > 100 {
			return s.errAt(at+".capacity_scale", "capacity_scale %v out of (0, 100]", r.CapacityScale)
		}
		if r.MemoryLimitScale < 0 || r.TimeoutScale < 0 || r.MemoryLimitScale > 100 || r.TimeoutScale > 100 {
			return s.errAt(at, "scales out of (0, 100]")
		}
	}
	if s.CapacityTier == "" && len(s.Tiers) > 0 {
		s.CapacityTier = s.Tiers[len(s.Tiers)-1].Name
	}
	if tiers[s.CapacityTier] == nil && len(s.Tiers) > 0 {
		return s.errAt("capacity_tier", "no tier named %q", s.CapacityTier)
	}
	if s.CapacityRPS < 0 {
		return s.errAt("capacity_rps", "negative capacity")
	}
	return nil
}

func (s *Scenario) checkDist(d *Dist, at string) error {
	switch d.Kind {
	case "":
		d.Kind = "exp"
	case "exp", "const", "lognormal":
	default:
		return s.errAt(at+".dist", "unknown distribution %q (want exp, const or lognormal)", d.Kind)
	}
	if d.Mean <= 0 {
		return s.errAt(at+".mean", "service needs a positive mean")
	}
	if d.CV == 0 {
		d.CV = 1
	}
	if d.CV < 0 || d.CV > 10 {
		return s.errAt(at+".cv", "cv %v out of (0, 10]", d.CV)
	}
	return nil
}

func (s *Scenario) checkRetry(r *Retry, timeout Duration, at string) error {
	if r.Attempts == 0 {
		r.Attempts = 1
	}
	if r.Attempts < 1 || r.Attempts > 10 {
		return s.errAt(at+".attempts", "attempts %d out of [1, 10]", r.Attempts)
	}
	switch r.Backoff {
	case "":
		r.Backoff = "fixed"
	case "fixed", "exponential":
	default:
		return s.errAt(at+".backoff", "unknown backoff %q (want fixed or exponential)", r.Backoff)
	}
	if r.Base < 0 || r.Cap < 0 || r.AttemptTimeout < 0 {
		return s.errAt(at, "negative duration")
	}
	if r.Cap == 0 {
		r.Cap = Duration(10 * time.Second)
	}
	if r.AttemptTimeout == 0 {
		r.AttemptTimeout = timeout
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// critMix returns the cumulative weights of the client's criticality mix in
// levee.Criticality order.
func (c *Client) critMix() [levee.NumCriticalities]float64 {
	var w [levee.NumCriticalities]float64
	if len(c.Criticality) == 0 {
		w[levee.Critical] = 1
	} else {
		keys := make([]string, 0, len(c.Criticality))
		for k := range c.Criticality {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			cr, _ := levee.ParseCriticality(k)
			w[cr] += c.Criticality[k]
		}
	}
	sum := 0.0
	for _, x := range w {
		sum += x
	}
	if sum == 0 {
		w = [levee.NumCriticalities]float64{}
		w[levee.Critical] = 1
		sum = 1
	}
	acc := 0.0
	for i := range w {
		acc += w[i] / sum
		w[i] = acc
	}
	return w
}
