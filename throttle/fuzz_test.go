package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

// FuzzThrottle drives a Throttle with arbitrary calls and time steps
// (backwards too) and checks its invariants.
func FuzzThrottle(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 2.0, int64(0))
	f.Add([]byte{255, 0, 255, 0, 128, 64}, 1.1, int64(-62135596800))
	f.Fuzz(func(t *testing.T, ops []byte, k float64, startSec int64) {
		if startSec < -62135596800 || startSec > 253402300799 { // years 1..9999
			startSec = 0
		}
		if k != 0 && !(k >= 1 && !math.IsInf(k, 0)) {
			if !panics(func() { New(WithK(k)) }) {
				t.Fatalf("New(WithK(%v)) did not panic", k)
			}
			return
		}
		th := New(WithK(k))
		now := time.Unix(startSec, 0)
		for _, op := range ops {
			c := levee.Criticality(op & 7) // invalid values too
			switch step := time.Duration(op>>3) * 37 * time.Millisecond; {
			case op&0x80 != 0:
				now = now.Add(-step / 4)
			default:
				now = now.Add(step)
			}
			if op&1 == 0 {
				if err := th.AllowAt(now, c); err != nil && err != ErrThrottled {
					t.Fatalf("AllowAt returned %v", err)
				}
			} else {
				th.DoneAt(now, c, op&2 == 0)
			}
			if p := th.RejectProbabilityAt(now, c); !(p >= 0 && p < 1) {
				t.Fatalf("probability %v outside [0, 1)", p)
			}
		}
		s := th.Stats()
		for c := range s.Requests {
			if s.Rejected[c] > s.Requests[c] {
				t.Fatalf("criticality %d: %d rejected of %d requests", c, s.Rejected[c], s.Requests[c])
			}
		}
	})
}
