package instrument

import (
	"sync/atomic"

	"github.com/levee-dev/levee/admit"
)

// StateChanges counts an admission controller's state changes by kind.
var StateChanges = &Metric{Name: "levee_state_changes_total", Unit: "{change}", Kind: Counter,
	Labels: []string{LabelKind},
	Help:   "State changes of the admission controller, by kind (overload_start, overload_end, degrade_changed, drill_start, drill_end, no_retry_start, no_retry_end, forced_shed_start, forced_shed_end)."}

// maxEventKinds bounds the event kinds counted; admit defines fewer.
const maxEventKinds = 32

// Events counts state changes by kind. The zero value counts nothing yet
// and is ready. It is safe for concurrent use.
type Events struct {
	counts [maxEventKinds]atomic.Uint64
}

// Observe counts e. It does not allocate. Kinds admit does not name are
// never read.
func (c *Events) Observe(e admit.Event) {
	if k := int(e.Kind); k > 0 && k < maxEventKinds {
		c.counts[k].Add(1)
	}
}

// Count returns how many events of kind k were observed.
func (c *Events) Count(k admit.EventKind) uint64 {
	if int(k) >= maxEventKinds {
		return 0
	}
	return c.counts[k].Load()
}

// Read gives the count of every kind admit names to emit, at zero until
// it happens.
func (c *Events) Read(emit Emit) {
	for k := 1; k < maxEventKinds; k++ {
		name := admit.EventKind(k).String()
		if name == "unknown" {
			continue
		}
		emit(StateChanges, float64(c.counts[k].Load()), name)
	}
}
