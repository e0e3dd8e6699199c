package admit

import (
	"testing"

	"github.com/levee-dev/levee"
)

func TestCountRejected(t *testing.T) {
	c := New()
	c.CountRejected(levee.Sheddable, levee.Deadline)
	c.CountRejected(levee.CriticalPlus, levee.Deadline)
	c.CountRejected(levee.Criticality(99), levee.Reason(0)) // counted as Critical, Deadline
	s := c.Snapshot()
	for _, tt := range []struct {
		cr   levee.Criticality
		want uint64
	}{{levee.Sheddable, 1}, {levee.SheddablePlus, 0}, {levee.Critical, 1}, {levee.CriticalPlus, 1}} {
		if got := s.Rejected[tt.cr][levee.Deadline]; got != tt.want {
			t.Errorf("%v: %d deadline rejections, want %d", tt.cr, got, tt.want)
		}
		if s.Admitted[tt.cr] != 0 {
			t.Errorf("%v: %d admitted, want 0", tt.cr, s.Admitted[tt.cr])
		}
	}
	if n := testing.AllocsPerRun(100, func() { c.CountRejected(levee.Sheddable, levee.Deadline) }); n != 0 {
		t.Errorf("%v allocations, want 0", n)
	}
	var nilCtl *Controller
	nilCtl.CountRejected(levee.Sheddable, levee.Deadline) // must not panic
}
