package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/retry"
)

// Status is a snapshot of the proxy: its backends, routes, queue and own
// answers. The status page serves it as JSON; proxyprom exports it.
type Status struct {
	At       time.Time `json:"at"`
	Draining bool      `json:"draining"`
	// Backends, by address; removed backends still draining included.
	Backends []BackendStatus `json:"backends"`
	// Ejected backends now, and the most the cap allows.
	Ejected    int `json:"ejected"`
	MaxEjected int `json:"max_ejected"`
	// Waiting requests in the queue (every backend full).
	Waiting int `json:"waiting"`
	// Answers the proxy gave instead of a backend, by kind (see
	// HeaderError), since New.
	Answers map[string]uint64 `json:"answers"`
	// Budget is the retry budget's counters.
	Budget retry.BudgetStats `json:"retry_budget"`
	// Routes, by name.
	Routes []RouteStatus `json:"routes"`
}

// BackendStatus is one backend's state.
type BackendStatus struct {
	Address string `json:"address"`
	// State: "serving", "slow_start" (ramping), "probing" (re-measuring
	// its no-queue latency), "ejected", "capped" (should be ejected; the
	// cap keeps it in, last in preference) or "draining" (removed).
	State string `json:"state"`
	// InFlight requests now; Capacity the most allowed now (the limit
	// times the slow-start weight; 0 when out of rotation); Limit the
	// adaptive limit; Weight the slow-start share.
	InFlight int64   `json:"in_flight"`
	Capacity int64   `json:"capacity"`
	Limit    int     `json:"limit"`
	Weight   float64 `json:"weight"`
	// Load is the backend's last Levee-Load, faded with age; 0 if it
	// reports none.
	Load float64 `json:"load"`
	// BaselineMs is its learned no-queue latency.
	BaselineMs float64 `json:"baseline_ms"`
	// Cause of the current ejection, Until its earliest end; Ejections
	// counts consecutive ones.
	Cause     string    `json:"cause,omitempty"`
	Until     time.Time `json:"until,omitzero"`
	Ejections int       `json:"ejections"`
	// ConsecutiveFailures of proxied attempts; Health the last active
	// check's verdict and its run.
	ConsecutiveFailures int64  `json:"consecutive_failures"`
	Health              string `json:"health"`
	HealthFailures      int64  `json:"health_failures"`
	// Throttle is the throttle's local rejection probability, by
	// criticality; absent when throttling is off.
	Throttle map[string]float64 `json:"throttle,omitempty"`
	// Outcomes of the attempts sent to it, by "answered", "overloaded",
	// "failed", "unreached"; Retries of them were retries; Resets the
	// responses it cut while streaming.
	Outcomes map[string]uint64 `json:"outcomes"`
	Retries  uint64            `json:"retries"`
	Resets   uint64            `json:"resets"`
}

// RouteStatus is one route's counters since New.
type RouteStatus struct {
	Route string `json:"route"`
	// Statuses answered, by class ("2xx", …; "none" when the caller left
	// first).
	Statuses map[string]uint64 `json:"statuses"`
	// EdgeShed counts the requests the edge's admission controller
	// rejected; Answers the proxy's own answers, by kind.
	EdgeShed uint64            `json:"edge_shed"`
	Answers  map[string]uint64 `json:"answers"`
	Retries  uint64            `json:"retries"`
	// Latency is the cumulative histogram: Count requests took at most
	// LeSeconds (the last bucket +Inf, as -1); SumSeconds their total.
	Latency    []LatencyBucket `json:"latency"`
	SumSeconds float64         `json:"sum_seconds"`
}

// LatencyBucket is a cumulative histogram bucket.
type LatencyBucket struct {
	LeSeconds float64 `json:"le_seconds"`
	Count     uint64  `json:"count"`
}

var classNames = [6]string{"none", "1xx", "2xx", "3xx", "4xx", "5xx"}

// Status returns a snapshot of the proxy.
func (h *Handler) Status() Status {
	now := h.now()
	s := h.settings.Load()
	st := Status{At: now, Draining: h.draining.Load(), Waiting: int(h.bal.queue.n.Load()),
		Budget: h.budget.Stats(), Answers: map[string]uint64{}}
	for k := range h.answers {
		st.Answers[answerNames[k]] = h.answers[k].Load()
	}
	h.bal.mu.Lock()
	set := *h.bal.set.Load()
	st.MaxEjected = maxEjected(len(set), s.loop.rot.maxShare)
	for _, b := range h.bal.all {
		bs := backendStatus(b, now, &s.loop)
		if b.rot.ejected {
			st.Ejected++
		}
		st.Backends = append(st.Backends, bs)
	}
	h.bal.mu.Unlock()
	sort.Slice(st.Backends, func(i, j int) bool {
		a, b := st.Backends[i], st.Backends[j]
		if a.Address != b.Address {
			return a.Address < b.Address
		}
		return a.State != "draining"
	})
	if m := h.routes.m.Load(); m != nil {
		for _, rs := range *m {
			st.Routes = append(st.Routes, routeStatus(rs))
		}
	}
	sort.Slice(st.Routes, func(i, j int) bool { return st.Routes[i].Route < st.Routes[j].Route })
	return st
}

// backendStatus reads b; the caller holds the balancer's lock.
func backendStatus(b *backend, now time.Time, p *loopParams) BackendStatus {
	w := slowStartWeight(now, b.rot.back, p.rot.slowWindow, p.rot.slowFloor)
	bs := BackendStatus{
		Address: b.addr, InFlight: b.inflight.Load(), Capacity: max(b.capacity.Load(), 0),
		Limit: b.lim.value(), Weight: w, Load: b.loadNow(now, p.loadDecay),
		BaselineMs: float64(b.lim.base) / float64(time.Millisecond),
		Ejections:  b.rot.ejections, ConsecutiveFailures: b.consec.Load(),
		Health:         checkResult(b.health.last.Load()).String(),
		HealthFailures: b.health.failRun.Load(),
		Outcomes:       map[string]uint64{}, Retries: b.retried.Load(), Resets: b.resets.Load(),
	}
	for o := range numOutcomes {
		bs.Outcomes[o.String()] = b.count[o].Load()
	}
	if b.th != nil {
		bs.Throttle = map[string]float64{}
		stats := b.th.Stats()
		for c := range levee.NumCriticalities {
			bs.Throttle[levee.Criticality(c).String()] = stats.Probability[c]
		}
	}
	switch {
	case b.rot.draining:
		bs.State = "draining"
	case b.rot.ejected:
		bs.State, bs.Cause, bs.Until = "ejected", b.rot.cause.String(), b.rot.until
	case b.rot.capped:
		bs.State = "capped"
	case b.lim.probing():
		bs.State = "probing"
	case w < 1:
		bs.State = "slow_start"
	default:
		bs.State = "serving"
	}
	return bs
}

func routeStatus(rs *routeStats) RouteStatus {
	r := RouteStatus{Route: rs.name, Statuses: map[string]uint64{}, Answers: map[string]uint64{},
		EdgeShed: rs.edgeShed.Load(), Retries: rs.retries.Load(),
		SumSeconds: float64(rs.sumNanos.Load()) / 1e9}
	for c := range rs.classes {
		if n := rs.classes[c].Load(); n > 0 {
			r.Statuses[classNames[c]] = n
		}
	}
	for k := range rs.answers {
		if n := rs.answers[k].Load(); n > 0 {
			r.Answers[answerNames[k]] = n
		}
	}
	var cum uint64
	for i := range rs.buckets {
		cum += rs.buckets[i].Load()
		le := -1.0
		if i < len(latencyBuckets) {
			le = latencyBuckets[i].Seconds()
		}
		r.Latency = append(r.Latency, LatencyBucket{LeSeconds: le, Count: cum})
	}
	return r
}

// serveStatus serves Status as JSON, or as a text table with
// ?format=text.
func (h *Handler) serveStatus(w http.ResponseWriter, r *http.Request) {
	st := h.Status()
	w.Header().Set("Cache-Control", "no-store")
	if r.URL.Query().Get("format") == "text" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		writeStatusText(w, &st)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st)
}

func writeStatusText(w http.ResponseWriter, st *Status) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "levee proxy at %s  draining=%v  ejected=%d/%d max  waiting=%d\n\n",
		st.At.Format(time.RFC3339), st.Draining, st.Ejected, st.MaxEjected, st.Waiting)
	fmt.Fprintln(tw, "backend\tstate\tin flight\tcapacity\tlimit\tweight\tload\tbaseline ms\tthrottle p\tfailures\thealth\tanswered\toverloaded\tfailed\t")
	for _, b := range st.Backends {
		p := 0.0
		for _, v := range b.Throttle {
			p = max(p, v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%.1f\t%.2f\t%d\t%s\t%d\t%d\t%d\t\n",
			b.Address, b.State, b.InFlight, b.Capacity, b.Limit, b.Weight, b.Load, b.BaselineMs, p,
			b.ConsecutiveFailures, b.Health, b.Outcomes["answered"], b.Outcomes["overloaded"], b.Outcomes["failed"])
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	var kinds []string
	for k, n := range st.Answers {
		if n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s=%d", k, n))
		}
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "proxy answers: %s\n", strings.Join(kinds, " "))
	fmt.Fprintf(w, "retry budget: requests=%d retries=%d refused=%d\n", st.Budget.Requests, st.Budget.Retries, st.Budget.Refused)
}
