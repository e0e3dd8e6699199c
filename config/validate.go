package config

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/suggest"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/overload"
)

// Validator collects the problems a section's Validate method finds, each
// located where the user wrote the field. Fields are named relative to the
// Validator's position: v.Errorf("tenants.acme.cores", …) in the "fleet"
// section reports "fleet.tenants.acme.cores" at its line in the file.
type Validator struct {
	ps   *problems
	path string
}

// Errorf reports a problem with field (a dotted path relative to v; ""
// for v's own position).
func (v *Validator) Errorf(field, format string, args ...any) {
	v.ps.at(v.join(field), fmt.Sprintf(format, args...))
}

// Sub returns a Validator positioned at the field or map key below v (a
// key containing dots or brackets is quoted as the paths in messages are).
func (v *Validator) Sub(key string) *Validator {
	return &Validator{ps: v.ps, path: child(v.path, key)}
}

// Index returns a Validator positioned at element i of the list at v.
func (v *Validator) Index(i int) *Validator {
	return &Validator{ps: v.ps, path: index(v.path, i)}
}

func (v *Validator) join(field string) string {
	switch {
	case field == "":
		return v.path
	case v.path == "":
		return field
	case strings.HasPrefix(field, "["):
		return v.path + field
	}
	return v.path + "." + field
}

// Range checks shared by the sections. lo and hi are inclusive unless
// open says otherwise.

func (v *Validator) float(field string, x, lo, hi float64, loOpen bool) {
	if math.IsNaN(x) || x < lo || x > hi || (loOpen && x == lo) {
		b := "["
		if loOpen {
			b = "("
		}
		v.Errorf(field, "must be in %s%g, %g], got %g", b, lo, hi, x)
	}
}

func (v *Validator) integer(field string, x, lo, hi int) {
	if x < lo || x > hi {
		v.Errorf(field, "must be in [%d, %d], got %d", lo, hi, x)
	}
}

func (v *Validator) duration(field string, d, lo, hi time.Duration, loOpen bool) {
	if d < lo || d > hi || (loOpen && d == lo) {
		b := "["
		if loOpen {
			b = "("
		}
		v.Errorf(field, "must be in %s%s, %s], got %s", b, fmtDuration(lo), fmtDuration(hi), fmtDuration(d))
	}
}

// fmtDuration writes d as a person would: 1m rather than 1m0s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// validate checks every built-in section, then the registered ones.
func validate(cfg *Config, ps *problems, fromFile bool) {
	v := &Validator{ps: ps}
	switch {
	case cfg.Version == 0 && fromFile:
		v.Errorf("version", "missing: add `version: %d` (the format this levee reads)", Version)
	case cfg.Version == 0:
		v.Errorf("version", "is 0: start from config.Default() (version %d)", Version)
	case cfg.Version != Version:
		v.Errorf("version", "unsupported version %d: this levee reads version %d", cfg.Version, Version)
	}
	cfg.Admit.validate(v.Sub("admit"))
	cfg.Signals.validate(v.Sub("signals"))
	cfg.Degrade.validate(v.Sub("degrade"))
	cfg.Overload.validate(v.Sub("overload"))
	cfg.HTTP.validate(v.Sub("http"), cfg.Admin)
	cfg.Admin.validate(v.Sub("admin"))
	cfg.Reload.validate(v.Sub("reload"))
	cfg.Client.validate(v.Sub("client"))
	names := make([]string, 0, len(cfg.Sections))
	for name := range cfg.Sections {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		switch s := cfg.Sections[name].(type) {
		case interface{ Validate(*Validator) }:
			s.Validate(v.Sub(name))
		case interface{ Validate() error }:
			// A section of plain data with Go's usual Validate: its error
			// is reported at the section, with no finer position.
			if err := s.Validate(); err != nil {
				v.Sub(name).Errorf("", "%v", err)
			}
		}
	}
}

// Validate checks a Config built in code, returning an *Error listing
// every problem, or nil. Load, Parse and Resolve validate already.
func (c *Config) Validate() error {
	ps := &problems{origins: map[string]origin{}}
	validate(c, ps, false)
	return ps.err()
}

const maxRate = 1e9

func (a *Admit) validate(v *Validator) {
	v.duration("period", a.Period, time.Millisecond, 10*time.Second, false)
	v.duration("run_queue.max_wait", a.RunQueue.MaxWait, 0, time.Minute, false)
	v.integer("run_queue.bound", a.RunQueue.Bound, 0, 1_000_000)
	tenants := make([]string, 0, len(a.Quotas))
	for t := range a.Quotas {
		tenants = append(tenants, t)
	}
	sort.Strings(tenants)
	qs := v.Sub("quotas")
	for _, t := range tenants {
		q := a.Quotas[t]
		tv := qs.Sub(t)
		if wire.FormatTenant(t) == "" {
			tv.Errorf("", "%q is not a tenant id levee can receive (printable text, no control characters)", t)
		}
		tv.limit(Limit{q.Rate, q.Burst})
		for c, l := range q.ByCriticality {
			if !c.Valid() {
				tv.Errorf("by_criticality", "invalid criticality %d", int(c))
				continue
			}
			tv.Sub("by_criticality").Sub(c.String()).limit(l)
		}
	}
}

func (v *Validator) limit(l Limit) {
	v.float("rate", l.Rate, 0, maxRate, false)
	v.integer("burst", l.Burst, 0, maxRate)
}

func (s *Signals) validate(v *Validator) {
	c := v.Sub("cpu")
	c.float("target", s.CPU.Target, 0, 2, true)
	c.duration("period", s.CPU.Period, 10*time.Millisecond, time.Minute, false)
	c.duration("smoothing", s.CPU.Smoothing, 0, time.Minute, false)
	sl := v.Sub("sched_latency")
	sl.duration("target", s.SchedLatency.Target, 0, 10*time.Second, true)
	sl.float("percentile", s.SchedLatency.Percentile, 0, 1, true)
	sl.duration("period", s.SchedLatency.Period, 10*time.Millisecond, time.Minute, false)
	sl.duration("smoothing", s.SchedLatency.Smoothing, 0, time.Minute, false)
	q := v.Sub("queue_delay")
	q.duration("target", s.QueueDelay.Target, 0, time.Minute, false)
	q.duration("interval", s.QueueDelay.Interval, 10*time.Millisecond, time.Minute, false)
	q.duration("smoothing", s.QueueDelay.Smoothing, 0, time.Minute, false)
	q.bounds("target_floor", "target_ceiling", s.QueueDelay.TargetFloor, s.QueueDelay.TargetCeiling, time.Minute)
	cc := v.Sub("concurrency")
	cc.float("latency_ratio", s.Concurrency.LatencyRatio, 1.2, 100, false)
	cc.bounds("latency_floor", "latency_ceiling", s.Concurrency.LatencyFloor, s.Concurrency.LatencyCeiling, time.Hour)
	cc.integer("min_queue", s.Concurrency.MinQueue, 1, 1_000_000)
	cc.duration("period", s.Concurrency.Period, 10*time.Millisecond, time.Minute, false)
	cc.duration("smoothing", s.Concurrency.Smoothing, 0, time.Minute, false)
	s.Memory.validate(v.Sub("memory"))
	s.GCCPU.validate(v.Sub("gc_cpu"))
	s.OpenFiles.validate(v.Sub("open_files"))
	g := v.Sub("goroutines")
	g.integer("limit", s.Goroutines.Limit, 0, 1e9)
	g.float("target", s.Goroutines.Target, 0, 1, true)
}

func (l *LimitSignal) validate(v *Validator) {
	v.float("target", l.Target, 0, 1, true)
	v.duration("period", l.Period, 10*time.Millisecond, time.Minute, false)
	v.duration("smoothing", l.Smoothing, 0, time.Minute, false)
}

// bounds checks a floor and a ceiling: 0 < floor ≤ ceiling ≤ hi.
func (v *Validator) bounds(floorField, ceilField string, floor, ceil, hi time.Duration) {
	v.duration(floorField, floor, 0, hi, true)
	if floor > 0 && floor <= hi && ceil < floor {
		v.Errorf(ceilField, "must be at least %s (%s), got %s", floorField, fmtDuration(floor), fmtDuration(ceil))
	} else {
		v.duration(ceilField, ceil, 0, hi, true)
	}
}

func (d *Degrade) validate(v *Validator) {
	v.float("target", d.Target, 0, 1, true)
	v.float("hysteresis", d.Hysteresis, 0, 1, false)
	v.integer("max", d.Max, 1, 100)
	v.duration("hold", d.Hold, 0, time.Hour, false)
}

func (o *Overload) validate(v *Validator) {
	v.duration("period", o.Period, 10*time.Millisecond, 10*time.Second, false)
	rs := v.Sub("resources")
	for _, r := range o.resources() {
		r.t.validate(rs.Sub(r.name))
	}
	as := v.Sub("actions")
	for _, a := range o.actions() {
		av := as.Sub(a.action.String())
		if a.c.Level < overload.Off || a.c.Level > overload.Critical {
			av.Errorf("level", "must be off, normal, elevated, high or critical, got %d", a.c.Level)
		}
		av.duration("cooldown", a.c.Cooldown, 0, 10*time.Minute, false)
	}
	fl := v.Sub("shed_floors")
	ascending(fl, []string{"elevated", "high", "critical"}, []float64{o.ShedFloors.Elevated, o.ShedFloors.High, o.ShedFloors.Critical}, 0, 4, false)
	v.integer64("body_limit", o.BodyLimit, 1, 1<<40)
	v.duration("idle_timeout", o.IdleTimeout, 10*time.Millisecond, time.Hour, false)
	v.duration("header_timeout", o.HeaderTimeout, 10*time.Millisecond, time.Hour, false)
	sh := v.Sub("in_flight_shares")
	sh.float("sheddable", o.InFlightShares.Sheddable, 0, 1, true)
	sh.float("sheddable_plus", o.InFlightShares.SheddablePlus, 0, 1, true)
	if x, y := o.InFlightShares.Sheddable, o.InFlightShares.SheddablePlus; x > 0 && x <= 1 && y > 0 && y <= 1 && x > y {
		sh.Errorf("sheddable_plus", "must be at least sheddable (%g), got %g", x, y)
	}
	v.integer("min_in_flight", o.MinInFlight, 1, 1_000_000)
}

func (t *Thresholds) validate(v *Validator) {
	ascending(v, []string{"elevated", "high", "critical"}, []float64{t.Elevated, t.High, t.Critical}, 0, 1, true)
	v.float("margin", t.Margin, 0, 0.5, true)
	v.float("goal", t.Goal, 0, 1, false)
}

// ascending checks values in [lo, hi] that do not descend, reporting a
// value below an earlier one at its own field; with zeroSkips a 0 (never
// reached) is left out of the order.
func ascending(v *Validator, fields []string, xs []float64, lo, hi float64, zeroSkips bool) {
	last, lastField := lo, ""
	for i, x := range xs {
		v.float(fields[i], x, lo, hi, false)
		if math.IsNaN(x) || x < lo || x > hi || (zeroSkips && x == 0) {
			continue
		}
		if x < last {
			v.Errorf(fields[i], "must be at least %s (%g), got %g", lastField, last, x)
			continue
		}
		last, lastField = x, fields[i]
	}
}

func (v *Validator) integer64(field string, x, lo, hi int64) {
	if x < lo || x > hi {
		v.Errorf(field, "must be in [%d, %d], got %d", lo, hi, x)
	}
}

func (h *HTTP) validate(v *Validator, admin Admin) {
	for i, p := range h.HealthPaths {
		if !strings.HasPrefix(p, "/") {
			v.Sub("health_paths").Index(i).Errorf("", "must be a path starting with /, got %q", p)
		}
	}
	paths := map[string]string{}
	for _, x := range []struct{ field, path string }{
		{"status_path", h.StatusPath}, {"metrics_path", h.MetricsPath},
	} {
		if x.path == "" {
			continue
		}
		if !strings.HasPrefix(x.path, "/") {
			v.Errorf(x.field, "must be a path starting with / (or empty for none), got %q", x.path)
			continue
		}
		if other, dup := paths[x.path]; dup {
			v.Errorf(x.field, "is the same path as http.%s", other)
		}
		paths[x.path] = x.field
	}
	if admin.Enabled && admin.Path != "" {
		if other, dup := paths[admin.Path]; dup {
			v.Errorf(other, "is the same path as admin.path")
		}
	}
	rs := v.Sub("routes")
	for i := range h.Routes {
		h.Routes[i].validate(rs.Index(i))
	}
}

// criticalityNames are the wire names, for suggestions.
var criticalityNames = []string{"CRITICAL_PLUS", "CRITICAL", "SHEDDABLE_PLUS", "SHEDDABLE"}

func (r *Route) validate(v *Validator) {
	switch {
	case r.Name == "":
		v.Errorf("name", "missing: every route rule needs a name")
	case len(r.Name) > 128 || !printable(r.Name):
		v.Errorf("name", "must be printable ASCII without spaces, at most 128 bytes")
	}
	if r.Path != "" && !strings.HasPrefix(r.Path, "/") {
		v.Errorf("path", "must start with /, got %q", r.Path)
	}
	for i, m := range r.Methods {
		if !token(m) {
			v.Sub("methods").Index(i).Errorf("", "%q is not an HTTP method", m)
		}
	}
	for name := range r.Headers {
		if !token(name) {
			v.Sub("headers").Sub(name).Errorf("", "%q is not a header name", name)
		}
	}
	if r.Criticality != "" {
		if _, err := levee.ParseCriticality(r.Criticality); err != nil {
			v.Errorf("criticality", "must be CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE or 4..1, got %q%s",
				r.Criticality, suggest.Hint(r.Criticality, criticalityNames))
		}
	}
	if r.Tenant != "" && wire.FormatTenant(r.Tenant) == "" {
		v.Errorf("tenant", "%q is not a tenant id levee can receive (printable text, no control characters)", r.Tenant)
	}
	if r.TenantHeader != "" && !token(r.TenantHeader) {
		v.Errorf("tenant_header", "%q is not a header name", r.TenantHeader)
	}
}

// MinTokenLen is the shortest admin token accepted.
const MinTokenLen = 16

func (a *Admin) validate(v *Validator) {
	if !strings.HasPrefix(a.Path, "/") || a.Path == "/" || strings.HasSuffix(a.Path, "/") {
		v.Errorf("path", "must be a path such as /levee/admin (starting with /, not ending with /), got %q", a.Path)
	}
	if a.Token != "" && len(a.Token) < MinTokenLen {
		v.Errorf("token", "must be at least %d characters", MinTokenLen)
	}
	if a.Token != "" && !printable(a.Token) {
		v.Errorf("token", "must be printable ASCII without spaces")
	}
	if a.Enabled && a.Token == "" && !a.ClientCert.Enabled {
		v.Errorf("enabled", "the admin endpoint needs admin.token (or token_file) or admin.client_cert.enabled: it never runs open")
	}
	for i, n := range a.ClientCert.Names {
		if n == "" {
			v.Sub("client_cert").Sub("names").Index(i).Errorf("", "must not be empty")
		}
	}
	v.duration("max_drill", a.MaxDrill, time.Second, 24*time.Hour, false)
}

func (r *Reload) validate(v *Validator) {
	if r.Poll != 0 {
		v.duration("poll", r.Poll, 100*time.Millisecond, time.Hour, false)
	}
}

// jitterNames are retry.Jitter's names, in its order.
var jitterNames = []string{"full", "equal", "decorrelated", "none"}

func (c *Client) validate(v *Validator) {
	r := v.Sub("retry")
	r.integer("max_attempts", c.Retry.MaxAttempts, 1, 10)
	r.duration("base", c.Retry.Base, time.Millisecond, time.Hour, false)
	r.duration("cap", c.Retry.Cap, max(c.Retry.Base, time.Millisecond), time.Hour, false)
	r.float("multiplier", c.Retry.Multiplier, 1, 10, false)
	if _, ok := jitterOf(c.Retry.Jitter); !ok {
		r.Errorf("jitter", "must be full, equal, decorrelated or none, got %q%s", c.Retry.Jitter, suggest.Hint(c.Retry.Jitter, jitterNames))
	}
	r.duration("attempt_timeout", c.Retry.AttemptTimeout, 0, 24*time.Hour, false)
	r.duration("timeout", c.Retry.Timeout, time.Millisecond, 24*time.Hour, false)
	b := v.Sub("budget")
	b.float("ratio", c.Budget.Ratio, 0, 1, false)
	b.duration("window", c.Budget.Window, 100*time.Millisecond, time.Hour, false)
	b.integer("floor", c.Budget.Floor, 0, 100_000)
	b.duration("floor_window", c.Budget.FloorWindow, time.Second, 24*time.Hour, false)
	t := v.Sub("throttle")
	t.float("k", c.Throttle.K, 1, 100, false)
	t.duration("window", c.Throttle.Window, 2400*time.Millisecond, time.Hour, false)
	t.duration("recovery", c.Throttle.Recovery, 0, time.Minute, false)
}

// printable reports whether s is printable ASCII without spaces.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return s != ""
}

// token reports whether s is an HTTP token (a method or header name).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}
