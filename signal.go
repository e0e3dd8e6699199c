package levee

// Signal is a resource reading that tells an admission controller whether
// the process is overloaded. A signal that measures waiting (a queueing
// delay, a latency) above its Target means overload. A utilisation — a
// signal that also has a method Saturation() float64 returning the
// reading at which its resource is full, as pressure's CPU does — above
// its Target means only that the resource is busy; package admit
// ("How signals combine") counts it as overload when a waiting signal
// confirms it.
//
// Implementations sample in the background (package pressure) or are set by
// hand (tests, the simulator on virtual time); Value and Target must be safe
// for concurrent use and cheap: they are read once per control period, never
// on the accept path.
type Signal interface {
	// Name identifies the signal in reports and metrics, e.g. "cpu",
	// "sched_latency", "queue_delay". It must be a constant.
	Name() string
	// Value returns the latest smoothed reading in the signal's own unit
	// (a utilisation fraction, seconds, ...). NaN means "no reading yet" and
	// is ignored.
	Value() float64
	// Target returns the value the controller steers the signal to; above it
	// the process sheds load. It must be positive.
	Target() float64
}
