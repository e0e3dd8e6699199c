package admit

import "github.com/levee-dev/levee"

// CountRejected counts one request that an adapter rejected itself, before
// asking Admit: a request whose caller had already gone, or whose time
// budget was already spent (leveehttp's Handler and leveegrpc's Server
// answer those at once, without reading anything else). It is counted as
// Admit counts its own rejections, an arrival of criticality cr rejected
// for reason, so that Snapshot.Rejected, the Prometheus metrics built on it
// and the status page see every rejection once, wherever it was decided
// (in dry-run, Snapshot.WouldReject: such a request's answer reaches
// nobody, and it is refused in dry-run too);
// the control loop leaves deadline and quota rejections out of the demand
// it steers, as it does Admit's. An invalid cr counts as Critical, an
// invalid reason as Deadline. It is two atomic additions: no lock, no
// allocation. A nil Controller counts nothing.
func (c *Controller) CountRejected(cr levee.Criticality, reason levee.Reason) {
	if c == nil {
		return
	}
	if !cr.Valid() {
		cr = levee.Critical
	}
	if reason <= 0 || int(reason) >= levee.NumReasons {
		reason = levee.Deadline
	}
	c.arrivals[cr].Add(1)
	if c.refuse(cr, reason) && reason == levee.Overloaded {
		c.shedBy[cr][StageExternal].Add(1)
	}
}
