package leveeprom

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// ThrottleCollector exports client-side adaptive throttles
// (throttle.Throttle), one "backend" label value per throttle. Add single
// throttles with Add, whole groups with AddGroup. The backend label is as
// bounded as what is added: a throttle.Group holds at most its WithMaxKeys
// throttles, so key groups by backend service or host, never by request.
// It reads Throttle.Stats when scraped and adds nothing to the request path.
// It is safe for concurrent use.
type ThrottleCollector struct {
	requests, accepts, rejections, probability *prometheus.Desc

	mu     sync.Mutex
	single map[string]*throttle.Throttle
	groups []*throttle.Group
}

// NewThrottleCollector returns an empty ThrottleCollector.
func NewThrottleCollector(opts ...Option) *ThrottleCollector {
	cl := newConfig(opts).constLabels
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"backend", "criticality"}, cl)
	}
	return &ThrottleCollector{
		requests: d("levee_throttle_requests_total",
			"Requests the client attempted to a backend, locally rejected ones included."),
		accepts: d("levee_throttle_accepts_total",
			"Requests the backend accepted (anything but an overload or quota rejection)."),
		rejections: d("levee_throttle_rejections_total",
			"Requests rejected locally by the adaptive throttle, never sent."),
		probability: d("levee_throttle_reject_probability",
			"Current probability (0..1) that the throttle rejects a request locally."),
		single: map[string]*throttle.Throttle{},
	}
}

// Add exports t under the backend label value backend, replacing any
// throttle added under the same name. A nil t removes it.
func (c *ThrottleCollector) Add(backend string, t *throttle.Throttle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t == nil {
		delete(c.single, backend)
		return
	}
	c.single[backend] = t
}

// AddGroup exports every throttle g holds at scrape time, each under its
// key as backend. A key also added with Add is exported once, from Add.
func (c *ThrottleCollector) AddGroup(g *throttle.Group) {
	if g == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.groups = append(c.groups, g)
}

// Describe implements prometheus.Collector.
func (c *ThrottleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.accepts
	ch <- c.rejections
	ch <- c.probability
}

// Collect implements prometheus.Collector.
func (c *ThrottleCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	seen := make(map[string]bool, len(c.single))
	type entry struct {
		backend string
		t       *throttle.Throttle
	}
	var all []entry
	for b, t := range c.single {
		seen[b] = true
		all = append(all, entry{b, t})
	}
	groups := append([]*throttle.Group(nil), c.groups...)
	c.mu.Unlock()
	for _, g := range groups {
		g.Range(func(key string, t *throttle.Throttle) bool {
			if !seen[key] {
				seen[key] = true
				all = append(all, entry{key, t})
			}
			return true
		})
	}
	for _, e := range all {
		s := e.t.Stats()
		for _, crit := range levee.Criticalities() {
			n := crit.String()
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(s.Requests[crit]), e.backend, n)
			ch <- prometheus.MustNewConstMetric(c.accepts, prometheus.CounterValue, float64(s.Accepts[crit]), e.backend, n)
			ch <- prometheus.MustNewConstMetric(c.rejections, prometheus.CounterValue, float64(s.Rejected[crit]), e.backend, n)
			ch <- prometheus.MustNewConstMetric(c.probability, prometheus.GaugeValue, s.Probability[crit], e.backend, n)
		}
	}
}

// BudgetCollector exports a retry.Budget: requests counted, retries the
// budget granted and retries it denied. Use WithConstLabels to tell several
// budgets apart. It reads Budget.Stats when scraped. It is safe for
// concurrent use.
type BudgetCollector struct {
	b                         *retry.Budget
	requests, retries, denied *prometheus.Desc
}

// NewBudgetCollector returns a collector for b (retry.DefaultBudget() when
// nil).
func NewBudgetCollector(b *retry.Budget, opts ...Option) *BudgetCollector {
	if b == nil {
		b = retry.DefaultBudget()
	}
	cl := newConfig(opts).constLabels
	return &BudgetCollector{
		b: b,
		requests: prometheus.NewDesc("levee_retry_budget_requests_total",
			"Requests counted by the retry budget (first attempts and retries).", nil, cl),
		retries: prometheus.NewDesc("levee_retries_total",
			"Retries attempted: granted by the retry budget.", nil, cl),
		denied: prometheus.NewDesc("levee_retries_denied_total",
			"Retries denied by the retry budget (the call gave up instead).", nil, cl),
	}
}

// Describe implements prometheus.Collector.
func (c *BudgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.retries
	ch <- c.denied
}

// Collect implements prometheus.Collector.
func (c *BudgetCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.b.Stats()
	ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(s.Requests))
	ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(s.Retries))
	ch <- prometheus.MustNewConstMetric(c.denied, prometheus.CounterValue, float64(s.Refused))
}
