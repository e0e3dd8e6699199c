package overload

import (
	"math"
	"time"
)

// Resource is one limit the Manager watches: a reading of how much of it
// is in use, the thresholds of the levels, and whether requests in flight
// hold it.
//
// Memory, GC, Goroutines and OpenFiles build the resources of package
// pressure's signals with levee's defaults; any other reading fits, for
// example the admission controller's load:
//
//	overload.Resource{Name: "admission", Read: func() overload.Reading {
//		return overload.Reading{Value: ctl.Load()}
//	}, Enter: [3]float64{2, 4, 8}}
type Resource struct {
	// Name identifies the resource in the status, the metrics and the
	// log ("memory", "gc_cpu", "goroutines", "open_files"). It must not
	// be empty and must be unique within a Manager.
	Name string
	// Unit names the unit of Reading.Used and Reading.Limit ("bytes",
	// "goroutines", "descriptors"); empty when they are not given.
	Unit string
	// Read returns the latest reading. The Manager calls it once per
	// Step, never on the request path; it must be safe for concurrent use.
	Read func() Reading
	// Enter holds the readings at which the resource puts the process at
	// Elevated, High and Critical; they must ascend. A threshold that is
	// 0 is never reached (the resource never causes that level).
	Enter [NumLevels - 1]float64
	// Margin is the hysteresis of the thresholds: a level is left once
	// the reading is below its threshold less Margin. Default (0)
	// DefaultMargin.
	Margin float64
	// Goal, when positive, says that requests in flight hold the resource
	// (memory they allocate, goroutines they run) and is the reading the
	// InFlight action steers it to: the requests in flight are capped at
	// the number the resource can hold at Goal (see InFlight). 0: the
	// resource does not grow with requests in flight.
	Goal float64
}

// DefaultMargin is the hysteresis of a Resource's thresholds when its
// Margin is 0: a level entered at 0.92 is left below 0.87.
const DefaultMargin = 0.05

// Reading is what a Resource reads at one moment.
type Reading struct {
	// Value is how much of the resource is in use, in the unit of the
	// thresholds (a fraction of the limit for memory, goroutines and
	// descriptors; a share of the CPU for the GC). NaN: no reading, the
	// resource counts for nothing.
	Value float64
	// Used and Limit are the figures behind Value, in the Resource's
	// Unit, for the status page and the metrics; 0 when unknown.
	Used, Limit float64
	// Time is when the reading was taken; the zero Time means "now". A
	// reading older than the Manager's maximum age (WithMaxAge) counts as
	// none: a sampler that stopped cannot hold a level.
	Time time.Time
	// Cycle, when not 0, numbers the measurements of Value: it changes
	// when the quantity was measured anew. The live heap is measured by
	// each garbage collection, so a memory reading between two
	// collections repeats an old measurement; the Manager uses Cycle to
	// know which requests in flight a measurement saw, and forces a
	// collection when one is overdue (the Collect action). 0: every
	// reading is a new measurement.
	Cycle uint64
}

// validate reports what is wrong with r, or "" when nothing is.
func (r *Resource) validate() string {
	switch {
	case r.Name == "":
		return "the name must not be empty"
	case r.Read == nil:
		return "Read must not be nil"
	case !(r.Margin >= 0) || math.IsInf(r.Margin, 0):
		return "Margin must be finite and ≥ 0"
	case !(r.Goal >= 0) || math.IsInf(r.Goal, 0):
		return "Goal must be finite and ≥ 0"
	}
	last := 0.0
	for _, e := range r.Enter {
		if !(e >= 0) || math.IsInf(e, 0) {
			return "every threshold must be finite and ≥ 0"
		}
		if e > 0 && e < last {
			return "the thresholds must ascend"
		}
		if e > 0 {
			last = e
		}
	}
	return ""
}

// margin returns the resource's hysteresis.
func (r *Resource) margin() float64 {
	if r.Margin == 0 {
		return DefaultMargin
	}
	return r.Margin
}
