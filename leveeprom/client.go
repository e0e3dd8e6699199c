package leveeprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee/internal/instrument"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// ThrottleCollector exports client-side adaptive throttles
// (throttle.Throttle), one "backend" label value per throttle. Add single
// throttles with Add, whole groups with AddGroup. The backend label is as
// bounded as what is added: a throttle.Group holds at most its WithMaxKeys
// throttles, so key groups by backend service or host, never by request.
// Every label value is valid UTF-8 of at most 128 bytes (see
// instrument.Label): one bad host name can never make the registry fail a
// scrape. It reads Throttle.Stats when scraped and adds nothing to the
// request path. It is safe for concurrent use.
type ThrottleCollector struct {
	d   descs
	set instrument.Throttles
}

// NewThrottleCollector returns an empty ThrottleCollector.
func NewThrottleCollector(opts ...Option) *ThrottleCollector {
	return &ThrottleCollector{d: newDescs(instrument.ThrottleMetrics, opts)}
}

// Add exports t under the backend label value backend, replacing any
// throttle added under the same name. A nil t removes it.
func (c *ThrottleCollector) Add(backend string, t *throttle.Throttle) { c.set.Add(backend, t) }

// AddGroup exports every throttle g holds at scrape time, each under its
// key as backend. A key also added with Add is exported once, from Add.
// A nil g is ignored.
func (c *ThrottleCollector) AddGroup(g *throttle.Group) { c.set.AddGroup(g) }

// Describe implements prometheus.Collector.
func (c *ThrottleCollector) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector.
func (c *ThrottleCollector) Collect(ch chan<- prometheus.Metric) { c.set.Read(c.d.emitTo(ch)) }

// BudgetCollector exports a retry.Budget: requests counted, retries the
// budget granted and retries it denied. Use WithConstLabels to tell several
// budgets apart. It reads Budget.Stats when scraped. It is safe for
// concurrent use.
type BudgetCollector struct {
	b *retry.Budget
	d descs
}

// NewBudgetCollector returns a collector for b (retry.DefaultBudget() when
// nil).
func NewBudgetCollector(b *retry.Budget, opts ...Option) *BudgetCollector {
	if b == nil {
		b = retry.DefaultBudget()
	}
	return &BudgetCollector{b: b, d: newDescs(instrument.BudgetMetrics, opts)}
}

// Describe implements prometheus.Collector.
func (c *BudgetCollector) Describe(ch chan<- *prometheus.Desc) { c.d.describe(ch) }

// Collect implements prometheus.Collector.
func (c *BudgetCollector) Collect(ch chan<- prometheus.Metric) {
	instrument.ReadBudget(c.b.Stats(), c.d.emitTo(ch))
}
