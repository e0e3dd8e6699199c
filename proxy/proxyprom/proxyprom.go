package proxyprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/proxy"
)

// Collector exports a levee proxy (proxy.Handler): per backend its
// load, limit, capacity, state and the outcomes of the attempts sent to
// it; per route the statuses answered, the edge's and the proxy's own
// rejections, retries and latency; and the queue, the ejections and the
// retry budget. It reads Handler.Status when scraped and adds nothing to
// the request path. Backend label values are the backends' addresses
// (bounded by the backend set; a removed backend disappears once drained);
// route values are the configuration's route names (at most 256). It is
// safe for concurrent use.
type Collector struct {
	h *proxy.Handler

	inFlight, capacity, limit, weight, load, baseline *prometheus.Desc
	state, ejections, failures, throttleP             *prometheus.Desc
	attempts, retries, resets                         *prometheus.Desc
	requests, edgeShed, answers, routeRetries         *prometheus.Desc
	duration                                          *prometheus.Desc
	waiting, ejected, maxEjected, draining            *prometheus.Desc
	budgetRequests, budgetRetries, budgetRefused      *prometheus.Desc
}

// proxyStates are the values of levee_proxy_backend_state's state label.
var proxyStates = []string{"serving", "slow_start", "probing", "ejected", "capped", "draining"}

// Option configures NewCollector.
type Option func(*prometheus.Labels)

// WithConstLabels adds fixed labels to every metric, to tell several
// proxies on one Registerer apart. Default none. They must not be the
// collector's own label names (backend, state, criticality, outcome,
// route, class, kind): registration fails if they are.
func WithConstLabels(l prometheus.Labels) Option {
	return func(dst *prometheus.Labels) { *dst = l }
}

// NewCollector returns a collector for h; register it on your own
// prometheus.Registerer:
//
//	reg.MustRegister(proxyprom.NewCollector(h))
func NewCollector(h *proxy.Handler, opts ...Option) *Collector {
	var cl prometheus.Labels
	for _, o := range opts {
		if o != nil {
			o(&cl)
		}
	}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, cl)
	}
	return &Collector{
		h:         h,
		inFlight:  d("levee_proxy_backend_in_flight", "Requests in flight to the backend.", "backend"),
		capacity:  d("levee_proxy_backend_capacity", "Requests the backend may have in flight now: its limit times its slow-start weight; 0 out of rotation.", "backend"),
		limit:     d("levee_proxy_backend_limit", "The backend's adaptive concurrency limit.", "backend"),
		weight:    d("levee_proxy_backend_weight_ratio", "The backend's slow-start share of its limit (1 = fully in).", "backend"),
		load:      d("levee_proxy_backend_load_ratio", "The backend's last Levee-Load, faded with age (1 = at its target; 0 = none reported).", "backend"),
		baseline:  d("levee_proxy_backend_baseline_seconds", "The backend's learned no-queue latency.", "backend"),
		state:     d("levee_proxy_backend_state", "1 for the backend's current state.", "backend", "state"),
		ejections: d("levee_proxy_backend_ejections", "The backend's consecutive ejections.", "backend"),
		failures:  d("levee_proxy_backend_consecutive_failures", "Consecutive failed attempts to the backend.", "backend"),
		throttleP: d("levee_proxy_backend_throttle_reject_probability", "Probability (0..1) that the backend's throttle refuses a request locally.", "backend", "criticality"),
		attempts:  d("levee_proxy_backend_attempts_total", "Attempts sent to the backend, by outcome: answered, overloaded, failed, unreached.", "backend", "outcome"),
		retries:   d("levee_proxy_backend_retries_total", "Attempts sent to the backend that were retries.", "backend"),
		resets:    d("levee_proxy_backend_resets_total", "Responses the backend cut while they streamed.", "backend"),

		requests:     d("levee_proxy_requests_total", "Requests answered, by route and status class (1xx..5xx; none when the caller left first).", "route", "class"),
		edgeShed:     d("levee_proxy_edge_shed_total", "Requests the edge's admission controller rejected, by route.", "route"),
		answers:      d("levee_proxy_answers_total", "Answers the proxy gave instead of a backend, by route and kind (the Levee-Proxy-Error values).", "route", "kind"),
		routeRetries: d("levee_proxy_retries_total", "Retries to another backend, by route.", "route"),
		duration:     d("levee_proxy_request_duration_seconds", "Time from a request's arrival at the proxy to the end of its answer.", "route"),

		waiting:        d("levee_proxy_waiting", "Requests waiting for a backend slot (every backend full)."),
		ejected:        d("levee_proxy_ejected", "Backends ejected now."),
		maxEjected:     d("levee_proxy_max_ejected", "The most backends the ejection cap allows out at once."),
		draining:       d("levee_proxy_draining", "1 while the proxy drains before stopping."),
		budgetRequests: d("levee_proxy_retry_budget_requests_total", "Requests counted by the proxy's retry budget."),
		budgetRetries:  d("levee_proxy_retry_budget_retries_total", "Retries the proxy's retry budget granted."),
		budgetRefused:  d("levee_proxy_retry_budget_refused_total", "Retries the proxy's retry budget refused."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.inFlight, c.capacity, c.limit, c.weight, c.load, c.baseline, c.state, c.ejections, c.failures,
		c.throttleP, c.attempts, c.retries, c.resets, c.requests, c.edgeShed, c.answers, c.routeRetries,
		c.duration, c.waiting, c.ejected, c.maxEjected, c.draining, c.budgetRequests, c.budgetRetries, c.budgetRefused,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.h.Status()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	for _, b := range st.Backends {
		if b.State == "draining" {
			continue // a same-address successor is exported instead, or it is leaving
		}
		a := b.Address
		gauge(c.inFlight, float64(b.InFlight), a)
		gauge(c.capacity, float64(b.Capacity), a)
		gauge(c.limit, float64(b.Limit), a)
		gauge(c.weight, b.Weight, a)
		gauge(c.load, b.Load, a)
		gauge(c.baseline, b.BaselineMs/1e3, a)
		for _, s := range proxyStates[:len(proxyStates)-1] {
			gauge(c.state, boolGauge(b.State == s), a, s)
		}
		gauge(c.ejections, float64(b.Ejections), a)
		gauge(c.failures, float64(b.ConsecutiveFailures), a)
		for crit, p := range b.Throttle {
			gauge(c.throttleP, p, a, crit)
		}
		for o, n := range b.Outcomes {
			counter(c.attempts, n, a, o)
		}
		counter(c.retries, b.Retries, a)
		counter(c.resets, b.Resets, a)
	}
	for _, r := range st.Routes {
		for class, n := range r.Statuses {
			counter(c.requests, n, r.Route, class)
		}
		counter(c.edgeShed, r.EdgeShed, r.Route)
		for kind, n := range r.Answers {
			counter(c.answers, n, r.Route, kind)
		}
		counter(c.routeRetries, r.Retries, r.Route)
		buckets := make(map[float64]uint64, len(r.Latency))
		var count uint64
		for _, b := range r.Latency {
			if b.LeSeconds < 0 {
				count = b.Count
				continue
			}
			buckets[b.LeSeconds] = b.Count
		}
		ch <- prometheus.MustNewConstHistogram(c.duration, count, r.SumSeconds, buckets, r.Route)
	}
	gauge(c.waiting, float64(st.Waiting))
	gauge(c.ejected, float64(st.Ejected))
	gauge(c.maxEjected, float64(st.MaxEjected))
	gauge(c.draining, boolGauge(st.Draining))
	counter(c.budgetRequests, st.Budget.Requests)
	counter(c.budgetRetries, st.Budget.Retries)
	counter(c.budgetRefused, st.Budget.Refused)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
