package leveeprom

import "github.com/levee-dev/levee/internal/instrument"

// ConnCollector exports the connections a server closed unread at their
// accept because their peer had closed them while they waited in the
// kernel's accept queue (leveehttp.Listener's Gone count), as
// levee_connections_gone_total. A rate of it says callers give up before
// the server even accepts them: the accept queue is longer than their
// patience. It reads the count when scraped and adds nothing to the
// request path; it is safe for concurrent use.
type ConnCollector struct{ counter }

// NewConnCollector returns a collector of the count gone returns, for
// example the Gone method of a leveehttp.Listener. Register one per
// server, telling several apart with WithConstLabels. A nil gone panics.
func NewConnCollector(gone func() uint64, opts ...Option) *ConnCollector {
	return &ConnCollector{newCounter("NewConnCollector", instrument.ConnsGone, gone, instrument.ReadConnsGone, opts)}
}
