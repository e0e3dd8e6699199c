package leveehttp

import (
	"net/http"
	"strconv"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/inbound"
	"github.com/levee-dev/levee/internal/wire"
)

// Rejection is a rejection as a Responder answers it.
type Rejection struct {
	// Reason is what Levee-Reject says: Overloaded (a throttled
	// rejection included), Quota or Deadline.
	Reason levee.Reason
	// NoRetry reports whether the caller is told not to retry
	// ("; no-retry").
	NoRetry bool
	// RetryAfter is the delay sent in Levee-Retry-After-Ms (jittered,
	// whole milliseconds; Retry-After has it in whole seconds, at least
	// 1); 0 when none is sent (deadline rejections).
	RetryAfter time.Duration
	// Status is the status levee answers with by default: 503 for
	// Overloaded, 429 for Quota, 504 for Deadline.
	Status int
	// Err is the rejection itself (shared: do not modify).
	Err *levee.RejectedError
}

// Responder writes the answer to a request the Handler rejects (or, under
// Error, a downstream rejection mapped for the caller). When it runs,
// levee's wire headers (Levee-Reject, and for overload and quota
// Retry-After and Levee-Retry-After-Ms) are set on w.Header(), and they are
// set again when it calls WriteHeader, so a Responder cannot lose them: it
// shapes the status, the other headers and the body. It should choose a
// status with the same meaning (levee clients read a rejection from
// Levee-Reject on a 429, 503 or 504). A Responder that writes nothing
// answers rej.Status with an empty body. It must not read the request's
// body (rejections are answered before anyone does), should be quick, and
// must be safe for concurrent use.
type Responder func(w http.ResponseWriter, r *http.Request, rej Rejection)

// WithResponder sets the Responder for rejections; ProblemJSON is a ready
// one. Default: levee's short text/plain answer ("overloaded\n"), which
// allocates nothing beyond the Retry-After values.
func WithResponder(f Responder) HandlerOption {
	return func(c *handlerConfig) { c.respond = f }
}

// ProblemJSON is a Responder answering with an RFC 9457 problem document
// (application/problem+json) and levee's status:
//
//	{"type":"https://levee.dev/problems/overloaded","title":"Service overloaded",
//	 "status":503,"detail":"The service is overloaded; retry after 1.2s.",
//	 "reject":"overloaded","retry_after_ms":1200}
//
// type is an identifier for the kind of rejection (overloaded, quota,
// deadline); reject is the Levee-Reject value and retry_after_ms the delay
// (absent when none is advised), as extension members.
func ProblemJSON(w http.ResponseWriter, r *http.Request, rej Rejection) {
	h := w.Header()
	h["Content-Type"] = problemType
	w.WriteHeader(rej.Status)
	_, _ = w.Write(appendProblem(make([]byte, 0, 256), rej))
}

var problemType = []string{"application/problem+json"}

var problemTitles = [...]string{
	levee.Overloaded: "Service overloaded",
	levee.Quota:      "Quota exceeded",
	levee.Deadline:   "Deadline cannot be met",
}

var problemDetails = [...]string{
	levee.Overloaded: "The service is overloaded",
	levee.Quota:      "The tenant is over its quota",
	levee.Deadline:   "The request's deadline cannot be met",
}

func appendProblem(b []byte, rej Rejection) []byte {
	reason := rej.Reason
	if reason != levee.Quota && reason != levee.Deadline {
		reason = levee.Overloaded
	}
	b = append(b, `{"type":"https://levee.dev/problems/`...)
	b = append(b, reason.String()...)
	b = append(b, `","title":"`...)
	b = append(b, problemTitles[reason]...)
	b = append(b, `","status":`...)
	b = strconv.AppendInt(b, int64(rej.Status), 10)
	b = append(b, `,"detail":"`...)
	b = append(b, problemDetails[reason]...)
	switch {
	case rej.NoRetry:
		b = append(b, "; do not retry."...)
	case rej.RetryAfter > 0:
		b = append(b, "; retry after "...)
		b = append(b, rej.RetryAfter.String()...)
		b = append(b, '.')
	default:
		b = append(b, '.')
	}
	b = append(b, `","reject":"`...)
	b = append(b, wire.FormatReject(reason, rej.NoRetry)...)
	b = append(b, '"')
	if rej.RetryAfter > 0 {
		b = append(b, `,"retry_after_ms":`...)
		b = wire.AppendRetryAfterMs(b, rej.RetryAfter)
	}
	return append(b, "}\n"...)
}

// respond answers rej through f, keeping the wire headers.
func respond(w http.ResponseWriter, r *http.Request, rej *levee.RejectedError, f Responder, uniform func() float64, names *HeaderNames) {
	h := w.Header()
	d := setRejectionHeaders(h, rej, uniform, names)
	h["X-Content-Type-Options"] = nosniff
	delete(h, "Content-Length")
	reason, noRetry := inbound.Wire(rej)
	status := rejectionStatus(reason)
	rw := &responderWriter{ResponseWriter: w, names: names, status: status, reject: h[names.Reject], retryAfter: h[wire.RetryAfter], retryAfterMs: h[names.RetryAfterMs]}
	f(rw, r, Rejection{Reason: reason, NoRetry: noRetry, RetryAfter: d, Status: status, Err: rej})
	if !rw.wrote {
		rw.WriteHeader(status)
	}
}

// responderWriter puts levee's wire headers back before the status goes
// out, whatever the Responder did to them.
type responderWriter struct {
	http.ResponseWriter
	names                            *HeaderNames
	status                           int // levee's, for a Write without WriteHeader
	reject, retryAfter, retryAfterMs []string
	wrote                            bool
}

func (w *responderWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		h := w.Header()
		h[w.names.Reject] = w.reject
		if w.retryAfter != nil {
			h[wire.RetryAfter] = w.retryAfter
			h[w.names.RetryAfterMs] = w.retryAfterMs
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responderWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(w.status)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap returns the underlying ResponseWriter for http.ResponseController.
func (w *responderWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
