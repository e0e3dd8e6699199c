package leveehttp

import (
	"math"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee/admit"
)

// loadSignal is a levee.Signal whose value the test sets (1 = at target).
type loadSignal struct{ v atomic.Uint64 }

func (s *loadSignal) Name() string    { return "test" }
func (s *loadSignal) Target() float64 { return 1 }
func (s *loadSignal) Value() float64  { return math.Float64frombits(s.v.Load()) }
func (s *loadSignal) set(v float64)   { s.v.Store(math.Float64bits(v)) }

// TestUntrustedAttemptCannotSwitchRetriesOff: under overload, a flood from
// one untrusted SHEDDABLE tenant that marks a quarter of its requests
// "Levee-Attempt: 9" must not turn every other caller's overload rejection
// into "no-retry" (the controller does so when retries are a large share
// of arrivals). Only trusted callers' attempt numbers count.
func TestUntrustedAttemptCannotSwitchRetriesOff(t *testing.T) {
	sig := &loadSignal{}
	sig.set(3)
	ctl := admit.New(admit.WithSignals(sig), admit.WithSeed(1))
	clk := &vclock{now: time.Now()}
	h := NewHandler(okHandler, ctl,
		WithTenant(func(r *http.Request) string { return r.Header.Get("X-Who") }),
		func(c *handlerConfig) { c.now = clk.Now })
	send := func(who, crit, attempt string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/api", nil)
		r.RemoteAddr = "198.51.100.7:1"
		r.Header.Set("X-Who", who)
		r.Header.Set("Levee-Criticality", crit)
		if attempt != "" {
			r.Header.Set("Levee-Attempt", attempt)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	ctl.Step(clk.Now())
	var others, othersNoRetry int
	for step := range 200 { // 10 s of 50 ms periods
		for i := range 40 {
			attempt := ""
			if i%4 == 0 {
				attempt = "9"
			}
			send("mallory", "SHEDDABLE", attempt)
		}
		for range 2 {
			w := send("alice", "SHEDDABLE_PLUS", "")
			if step >= 100 && w.Code == http.StatusServiceUnavailable {
				others++
				if w.Header().Get("Levee-Reject") != "overloaded" {
					othersNoRetry++
				}
			}
		}
		ctl.Step(clk.add(50 * time.Millisecond))
	}
	if s := ctl.Snapshot(); s.NoRetry || s.RetryShare > 0 {
		t.Errorf("retry share %.2f, no-retry %v; want 0, off", s.RetryShare, s.NoRetry)
	}
	if others == 0 {
		t.Fatal("the other tenant was never rejected: the test did not overload the controller")
	}
	if othersNoRetry != 0 {
		t.Errorf("%d of the other tenant's %d rejections said no-retry, want none", othersNoRetry, others)
	}
}
