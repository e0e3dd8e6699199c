package instrument

import (
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/retry"
	"github.com/levee-dev/levee/throttle"
)

// The client side's metrics (ThrottleMetrics and BudgetMetrics list them).
var (
	ThrottleRequests = &Metric{Name: "levee_throttle_requests_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelBackend, LabelCriticality},
		Help:   "Requests the client attempted to a backend, locally rejected ones included."}
	ThrottleAccepts = &Metric{Name: "levee_throttle_accepts_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelBackend, LabelCriticality},
		Help:   "Requests the backend accepted (anything but an overload or quota rejection)."}
	ThrottleRejections = &Metric{Name: "levee_throttle_rejections_total", Unit: unitRequests, Kind: Counter,
		Labels: []string{LabelBackend, LabelCriticality},
		Help:   "Requests rejected locally by the adaptive throttle, never sent."}
	ThrottleProbability = &Metric{Name: "levee_throttle_reject_probability", Kind: Gauge,
		Labels: []string{LabelBackend, LabelCriticality},
		Help:   "Current probability (0..1) that the throttle rejects a request locally."}

	BudgetRequests = &Metric{Name: "levee_retry_budget_requests_total", Unit: unitRequests, Kind: Counter,
		Help: "Requests counted by the retry budget (first attempts and retries)."}
	BudgetRetries = &Metric{Name: "levee_retries_total", Unit: unitRequests, Kind: Counter,
		Help: "Retries attempted: granted by the retry budget."}
	BudgetDenied = &Metric{Name: "levee_retries_denied_total", Unit: unitRequests, Kind: Counter,
		Help: "Retries denied by the retry budget (the call gave up instead)."}
)

// ThrottleMetrics lists the metrics Throttles.Read gives for each backend
// and criticality.
var ThrottleMetrics = []*Metric{ThrottleRequests, ThrottleAccepts, ThrottleRejections, ThrottleProbability}

// BudgetMetrics lists the metrics ReadBudget gives, in this order.
var BudgetMetrics = []*Metric{BudgetRequests, BudgetRetries, BudgetDenied}

// ReadBudget gives the readings of a retry budget's s to emit.
func ReadBudget(s retry.BudgetStats, emit Emit) {
	emit(BudgetRequests, float64(s.Requests))
	emit(BudgetRetries, float64(s.Retries))
	emit(BudgetDenied, float64(s.Refused))
}

// Throttles is the set of client throttles an exporter reads, each under
// a backend name: single throttles added by name and whole groups, whose
// keys are read at every Read. A name added singly wins over the same key
// in a group, so each backend is read once. The zero value is empty and
// ready. It is safe for concurrent use.
type Throttles struct {
	mu     sync.Mutex
	single map[string]*throttle.Throttle
	groups []*throttle.Group
}

// Add reads t under backend, replacing any throttle added under the same
// name. A nil t removes it.
func (s *Throttles) Add(backend string, t *throttle.Throttle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t == nil {
		delete(s.single, backend)
		return
	}
	if s.single == nil {
		s.single = map[string]*throttle.Throttle{}
	}
	s.single[backend] = t
}

// AddGroup reads every throttle g holds at Read time, each under its key.
// A nil g is ignored.
func (s *Throttles) AddGroup(g *throttle.Group) {
	if g == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups = append(s.groups, g)
}

// Read gives every throttle's readings to emit. It holds no lock while it
// reads the throttles.
func (s *Throttles) Read(emit Emit) {
	type entry struct {
		backend string
		t       *throttle.Throttle
	}
	s.mu.Lock()
	seen := make(map[string]bool, len(s.single))
	all := make([]entry, 0, len(s.single))
	for b, t := range s.single {
		if b = Label(b); !seen[b] {
			seen[b] = true
			all = append(all, entry{b, t})
		}
	}
	groups := append([]*throttle.Group(nil), s.groups...)
	s.mu.Unlock()
	for _, g := range groups {
		g.Range(func(key string, t *throttle.Throttle) bool {
			if key = Label(key); !seen[key] {
				seen[key] = true
				all = append(all, entry{key, t})
			}
			return true
		})
	}
	for _, e := range all {
		readThrottle(e.backend, e.t.Stats(), emit)
	}
}

// maxLabel bounds a label value taken from a caller's key, in bytes.
const maxLabel = 128

// Label returns key as a valid, bounded label value: key itself when it is
// valid UTF-8 of at most 128 bytes, else its longest valid prefix of at
// most 111 bytes, "~" and the 16 hex digits of its FNV-1a hash (two keys
// that differ stay apart). A key with invalid bytes (a host name from a
// hostile URL) would otherwise make a Prometheus registry fail every
// scrape.
func Label(key string) string {
	if len(key) <= maxLabel && utf8.ValidString(key) {
		return key
	}
	prefix := strings.ToValidUTF8(key, "")
	n := min(len(prefix), maxLabel-17)
	for n > 0 && n < len(prefix) && !utf8.RuneStart(prefix[n]) {
		n--
	}
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h = (h ^ uint64(key[i])) * 1099511628211
	}
	return prefix[:n] + "~" + strconv.FormatUint(h|1<<63, 16)
}

// readThrottle gives one throttle's readings, for every criticality.
func readThrottle(backend string, s throttle.Stats, emit Emit) {
	for _, crit := range levee.Criticalities() {
		n := crit.String()
		emit(ThrottleRequests, float64(s.Requests[crit]), backend, n)
		emit(ThrottleAccepts, float64(s.Accepts[crit]), backend, n)
		emit(ThrottleRejections, float64(s.Rejected[crit]), backend, n)
		emit(ThrottleProbability, s.Probability[crit], backend, n)
	}
}
