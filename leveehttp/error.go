package leveehttp

import (
	"net/http"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/inbound"
	"github.com/levee-dev/levee/internal/wire"
)

// errOverloadedNoRetry is "overloaded; no-retry" without a delay: never
// modified.
var errOverloadedNoRetry = inbound.OverloadedNoRetry

// asRejected is levee.AsRejected with a fast path: the common unwrapped
// *levee.RejectedError costs no allocation.
func asRejected(err error) *levee.RejectedError {
	if r, ok := err.(*levee.RejectedError); ok {
		return r
	}
	return levee.AsRejected(err)
}

// MidTier maps the error of a downstream call to the rejection this server
// should answer its own caller with (the table in the package
// documentation), or nil when err is not an overload, quota or deadline
// failure:
//
//   - a levee rejection for overload (the downstream's, after this layer's
//     retries), an exhausted retry budget or a local throttle: Overloaded
//     with NoRetry, keeping the downstream's delay;
//   - a quota rejection: passed through with its delay and NoRetry;
//   - a deadline rejection, context.DeadlineExceeded or context.Canceled:
//     Deadline with NoRetry.
func MidTier(err error) *levee.RejectedError { return inbound.MidTier(err) }

// Error answers r with the mid-tier mapping of err, the error of a
// downstream call made while serving r (see MidTier): 503 "overloaded;
// no-retry", 429 "quota" with the downstream's delay, or 504 "deadline".
// Any other non-nil err is answered 502 Bad Gateway. When r is served by a
// levee Handler, the rejection is written by its Responder (WithResponder)
// and err is also reported to the admission controller as the
// request's outcome (a downstream overload is how it learns that its
// dependencies, not itself, are the bottleneck). Error does nothing for a
// nil err.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	if err == nil {
		return
	}
	st := stateFrom(r.Context())
	if st != nil && st.explicit == nil {
		st.explicit = err
	}
	m := MidTier(err)
	if m == nil {
		http.Error(w, "bad gateway", http.StatusBadGateway)
		return
	}
	if st != nil {
		st.h.write(w, r, m)
		return
	}
	writeRejection(w, m, defaultUniform, &defaultNames)
}

// WriteRejection answers with rej as levee's wire protocol says: the status
// for its reason (503 overloaded or throttled, 429 quota, 504 deadline),
// Levee-Reject (with "; no-retry" when rej.NoRetry or for a throttled
// rejection), and for overload and quota Retry-After (whole seconds, at
// least 1) and Levee-Retry-After-Ms, jittered by ±25% around rej.RetryAfter
// (DefaultRetryAfter when 0). It writes a short text body. A nil rej is
// answered as overloaded; no-retry.
func WriteRejection(w http.ResponseWriter, rej *levee.RejectedError) {
	if rej == nil {
		rej = errOverloadedNoRetry
	}
	writeRejection(w, rej, defaultUniform, &defaultNames)
}

var rejectionBodies = [...][]byte{
	levee.Overloaded: []byte("overloaded\n"),
	levee.Quota:      []byte("over quota\n"),
	levee.Deadline:   []byte("deadline exceeded\n"),
	levee.Throttled:  []byte("overloaded\n"),
}

var (
	textPlain = []string{"text/plain; charset=utf-8"}
	nosniff   = []string{"nosniff"}
)

func writeRejection(w http.ResponseWriter, rej *levee.RejectedError, uniform func() float64, names *HeaderNames) {
	h := w.Header()
	setRejectionHeaders(h, rej, uniform, names)
	h["Content-Type"] = textPlain
	h["X-Content-Type-Options"] = nosniff
	delete(h, "Content-Length")
	w.WriteHeader(rejectionStatus(rej.Reason))
	body := rejectionBodies[levee.Overloaded]
	if int(rej.Reason) < len(rejectionBodies) && rej.Reason != 0 {
		body = rejectionBodies[rej.Reason]
	}
	_, _ = w.Write(body)
}

// rejectionStatus is the one table from levee.Reason to HTTP status.
func rejectionStatus(r levee.Reason) int {
	switch r {
	case levee.Quota:
		return http.StatusTooManyRequests
	case levee.Deadline:
		return http.StatusGatewayTimeout
	default: // Overloaded, Throttled
		return http.StatusServiceUnavailable
	}
}

// setRejectionHeaders sets levee's wire headers for rej and returns the
// delay it advised (0 for none).
func setRejectionHeaders(h http.Header, rej *levee.RejectedError, uniform func() float64, names *HeaderNames) time.Duration {
	reason, noRetry := inbound.Wire(rej)
	nr := 0
	if noRetry {
		nr = 1
	}
	h[names.Reject] = rejectValues[reason][nr]
	if reason == levee.Deadline {
		return 0
	}
	d := inbound.Delay(rej.RetryAfter, uniform())
	// Both values share one string and one backing array: two allocations.
	var b [48]byte
	secs := wire.AppendRetryAfter(b[:0], d)
	n := len(secs)
	all := string(wire.AppendRetryAfterMs(secs, d))
	vals := []string{all[:n], all[n:]}
	h[wire.RetryAfter] = vals[0:1:1]
	h[names.RetryAfterMs] = vals[1:2:2]
	// The delay as sent: whole milliseconds, rounded up.
	d = min(max(d, 0), wire.MaxRetryAfter)
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// rejectValues holds the shared Levee-Reject header values, indexed by
// reason and no-retry; never modified.
var rejectValues = func() (v [levee.Throttled + 1][2][]string) {
	for r := levee.Overloaded; r <= levee.Throttled; r++ {
		v[r][0] = []string{wire.FormatReject(r, false)}
		v[r][1] = []string{wire.FormatReject(r, true)}
	}
	return v
}()
