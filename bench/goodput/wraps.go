package goodput

import (
	"net/http"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"

	"github.com/levee-dev/levee/tools/backend"
)

// Protections plugged into the backend by this package, by name; levee
// and nothing are the harness's own backend.Levee and backend.None.
const (
	BBR           = "bbr"            // aegis BBR as its docs set it up
	BBRTuned      = "bbr-tuned"      // aegis BBR with CPU read against the one core the server may use
	Failsafe      = "failsafe"       // failsafe-go adaptive limiter, defaults
	FailsafeTuned = "failsafe-tuned" // failsafe-go adaptive limiter with queueing and a max wait

	// Forced rejection: each peer set up so that it refuses every request,
	// to measure the server CPU one rejection costs (levee's is
	// backend.LeveeOptions.ForceOverload).
	BBRReject      = "bbr-reject"
	FailsafeReject = "failsafe-reject"
)

// Wraps returns every protection of this package. Each Wrap is called once,
// in the backend process.
func Wraps() map[string]backend.Wrap {
	return map[string]backend.Wrap{
		BBR:      func(app http.Handler) http.Handler { return bbrHandler(app, bbr.NewLimiter()) },
		BBRTuned: func(app http.Handler) http.Handler { return bbrHandler(app, bbr.NewLimiter(bbr.WithCPUQuota(1))) },
		Failsafe: func(app http.Handler) http.Handler {
			return marked(failsafehttp.NewHandler(app, adaptivelimiter.NewWithDefaults[*http.Response]()))
		},
		FailsafeTuned: func(app http.Handler) http.Handler {
			l := adaptivelimiter.NewBuilder[*http.Response]().
				WithQueueing(2, 3).
				WithMaxWaitTime(50 * time.Millisecond).
				Build()
			return marked(failsafehttp.NewHandler(app, l))
		},
		BBRReject: func(app http.Handler) http.Handler {
			// With a negative threshold the CPU always reads as over it;
			// two requests held in flight forever exceed the limit BBR
			// estimates with no completions (0), so it drops the rest.
			l := bbr.NewLimiter(bbr.WithCPUThreshold(-1))
			for range 2 {
				_, _ = l.Allow()
			}
			return bbrHandler(app, l)
		},
		FailsafeReject: func(app http.Handler) http.Handler {
			l := adaptivelimiter.NewBuilder[*http.Response]().WithLimits(1, 1, 1).Build()
			_, _ = l.TryAcquirePermit() // held forever: the limiter is full
			return marked(failsafehttp.NewHandler(app, l))
		},
	}
}

// bbrHandler is the HTTP form of kratos's ratelimit.Server() middleware
// (kratos/v2/middleware/ratelimit, which uses aegis bbr.NewLimiter() by
// default): Allow before the handler, 429 "RATELIMIT" when it refuses,
// done after the handler.
func bbrHandler(app http.Handler, l ratelimit.Limiter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		done, err := l.Allow()
		if err != nil {
			w.Header().Set(rejectHeader, "overloaded")
			http.Error(w, "service unavailable due to rate limit exceeded", http.StatusTooManyRequests)
			return
		}
		app.ServeHTTP(w, r)
		done(ratelimit.DoneInfo{})
	})
}

// rejectHeader marks a peer's rejection the way levee marks its own, so
// that the harness's counters (backend.Stats, load.Classify) count it
// as a rejection rather than a failure. The naive clients retry both alike.
const rejectHeader = "Levee-Reject"

// marked adds rejectHeader to the 429 and 503 answers of a peer's handler;
// the application handler itself never answers them.
func marked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(markWriter{w}, r)
	})
}

type markWriter struct{ http.ResponseWriter }

func (m markWriter) WriteHeader(code int) {
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		m.Header().Set(rejectHeader, "overloaded")
	}
	m.ResponseWriter.WriteHeader(code)
}

func (m markWriter) Unwrap() http.ResponseWriter { return m.ResponseWriter }
