package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/leveehttp"
)

// DeadlineHeader carries the absolute deadline of an attempt's client, in
// Unix nanoseconds, so that a test backend on the same machine can count the
// handler runs that finish after their client has given up. It is a
// measurement aid of levee's loopback lab, not part of levee's wire
// protocol; HTTP sends it only when told to (HTTP.SendDeadline).
const DeadlineHeader = "Loadgen-Deadline"

// NewTransport returns a keep-alive HTTP/1.1 transport for load: no
// proxy, no compression, an idle pool large enough that connections are
// reused under high concurrency, and a short dial timeout.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
}

type counting struct{ next http.RoundTripper }

// CountAttempts wraps rt so that every RoundTrip counts one attempt on the
// Call carried by the request's context (see WithCall). Put it below any
// retrying or throttling layer, right above the network.
func CountAttempts(rt http.RoundTripper) http.RoundTripper { return counting{rt} }

func (c counting) RoundTrip(r *http.Request) (*http.Response, error) {
	CallFrom(r.Context()).Attempt()
	return c.next.RoundTrip(r)
}

// Unwrap returns the wrapped RoundTripper.
func (c counting) Unwrap() http.RoundTripper { return c.next }

// Classify maps the result of an HTTP exchange to an Outcome and, for
// Failed, its Failure: a 2xx is Goodput; a 429, 503 or 504 carrying
// levee's Levee-Reject header, or a levee rejection error, is Rejected
// (Throttled if the client refused it locally); a local resource error
// (no file descriptor, no port) is GenError; everything else is Failed. It
// does not read or close the body.
func Classify(resp *http.Response, err error) (Outcome, Failure) {
	if err != nil {
		if r := levee.AsRejected(err); r != nil {
			if r.Reason == levee.Throttled {
				return Throttled, OtherFailure
			}
			return Rejected, OtherFailure
		}
		switch {
		case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE), errors.Is(err, syscall.EADDRNOTAVAIL):
			return GenError, OtherFailure
		case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
			return Failed, Timeout
		case errors.Is(err, context.Canceled):
			return Failed, Cancelled
		case errors.Is(err, syscall.ECONNREFUSED):
			return Failed, Refused
		case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return Failed, Reset
		}
		return Failed, OtherFailure
	}
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return Goodput, OtherFailure
	case (c == http.StatusTooManyRequests || c == http.StatusServiceUnavailable || c == http.StatusGatewayTimeout) &&
		resp.Header.Get(leveehttp.HeaderReject) != "":
		return Rejected, OtherFailure
	case c >= 500:
		return Failed, Status5xx
	case c >= 400:
		return Failed, Status4xx
	}
	return Failed, OtherFailure
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// Client models: how the simulated callers retry.
const (
	// ClientNone sends each request once, with an overall timeout.
	ClientNone = "none"
	// ClientNaive retries any failure at once, up to Retries times, each
	// attempt with its own timeout, with no backoff, budget or throttling:
	// the client levee exists to replace.
	ClientNaive = "naive"
	// ClientLevee sends through leveehttp.NewTransport with its defaults:
	// adaptive throttling per host, budgeted jittered retries, deadline
	// propagation; Timeout is the request's overall deadline.
	ClientLevee = "levee"
)

// Clients lists the client models.
var Clients = []string{ClientNone, ClientNaive, ClientLevee}

// HTTP sends the requests of a run: one target, one client model. Build
// it with NewHTTP; it is safe for concurrent use.
type HTTP struct {
	// Method, URL, Header and Body describe the request. Body is sent
	// with every attempt (GetBody is set, so retries replay it).
	Method string
	URL    string
	Header http.Header
	Body   []byte
	// Client is ClientNone, ClientNaive or ClientLevee.
	Client string
	// Timeout is the deadline: per attempt for ClientNaive, overall
	// otherwise. Default 1s.
	Timeout time.Duration
	// Retries is ClientNaive's number of immediate retries.
	Retries int
	// SendDeadline sends DeadlineHeader with each attempt.
	SendDeadline bool
	// Inspect, if set, sees every response that arrives (its status,
	// headers and first MiB of body), from the request's goroutine.
	Inspect func(c *Call, resp *http.Response, body []byte)
	// Prepare, if set, sees every attempt's request (attempt 0 first; for
	// ClientLevee the one request its Transport retries itself) just
	// before it is sent, its headers set, and may change it: a lab
	// rotating tenant ids or sending hostile headers. c is nil for the
	// requests of Once. It runs on the request's goroutine, concurrently
	// with other requests.
	Prepare func(c *Call, attempt int, r *http.Request)
	// Dial, if set, opens the transport's connections in place of a
	// net.Dialer with a 2 s timeout: a lab binding each connection to a
	// chosen local address.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	client *http.Client
}

// NewHTTP returns h ready to send, over a fresh keep-alive transport
// (NewTransport) that counts attempts, under the client model h.Client.
func NewHTTP(h HTTP) (*HTTP, error) {
	if h.Method == "" {
		h.Method = http.MethodGet
	}
	if h.Timeout <= 0 {
		h.Timeout = time.Second
	}
	if h.Retries < 0 || h.Retries > 10 {
		return nil, fmt.Errorf("load: %d retries, want 0 … 10", h.Retries)
	}
	target, err := http.NewRequest(h.Method, h.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	tr := NewTransport()
	if h.Dial != nil {
		tr.DialContext = h.Dial
	}
	var rt http.RoundTripper = CountAttempts(tr)
	switch h.Client {
	case ClientNone, ClientNaive:
	case ClientLevee:
		// The target is the levee host: it gets the tenant id too.
		rt = leveehttp.NewTransport(rt, leveehttp.WithHosts(target.URL.Host))
	default:
		return nil, fmt.Errorf("load: unknown client model %q (want none, naive or levee)", h.Client)
	}
	h.client = &http.Client{Transport: rt, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &h, nil
}

// timeout is h's Timeout or its default.
func (h HTTP) timeout() time.Duration {
	if h.Timeout <= 0 {
		return time.Second
	}
	return h.Timeout
}

// CloseIdleConnections closes the idle connections of h's transport.
func (h *HTTP) CloseIdleConnections() { h.client.CloseIdleConnections() }

// Func returns the request function of h's client model.
func (h *HTTP) Func() Func {
	return func(ctx context.Context, c *Call) Outcome {
		if h.Client != ClientNaive {
			ctx, cancel := context.WithTimeout(ctx, h.Timeout)
			defer cancel()
			o, f := h.send(ctx, c, 0)
			c.Failure = f
			return o
		}
		o, f := Failed, OtherFailure
		for a := 0; a <= h.Retries; a++ {
			actx, cancel := context.WithTimeout(ctx, h.Timeout)
			o, f = h.send(actx, c, a)
			cancel()
			if o == Goodput || o == GenError || ctx.Err() != nil {
				break
			}
		}
		c.Failure = f
		return o
	}
}

// Once returns a function that sends one request through h, with h's
// timeout, for Closed.
func (h *HTTP) Once() func(ctx context.Context) Outcome {
	return func(ctx context.Context) Outcome {
		ctx, cancel := context.WithTimeout(ctx, h.Timeout)
		defer cancel()
		o, _ := h.send(ctx, nil, 0)
		return o
	}
}

// send makes one attempt (or, for ClientLevee, one logical request) and
// classifies it, having drained and closed the body.
func (h *HTTP) send(ctx context.Context, c *Call, attempt int) (Outcome, Failure) {
	var body io.Reader
	if h.Body != nil {
		body = bytes.NewReader(h.Body)
	}
	if c != nil {
		ctx = levee.WithCall(ctx, levee.Call{Criticality: c.Criticality, Tenant: c.Tenant, Attempt: attempt})
	}
	req, err := http.NewRequestWithContext(ctx, h.Method, h.URL, body)
	if err != nil {
		return GenError, OtherFailure
	}
	if h.Body != nil {
		b := h.Body
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	for k, v := range h.Header {
		req.Header[k] = v
	}
	if h.Client != ClientLevee && c != nil {
		// levee's Transport writes these from the context; the other
		// models are plain clients that set them by hand.
		req.Header.Set(leveehttp.HeaderCriticality, c.Criticality.String())
		if c.Tenant != "" {
			req.Header.Set(leveehttp.HeaderTenant, c.Tenant)
		}
		req.Header.Set(leveehttp.HeaderAttempt, strconv.Itoa(attempt))
	}
	if dl, ok := ctx.Deadline(); ok && h.SendDeadline {
		req.Header.Set(DeadlineHeader, strconv.FormatInt(dl.UnixNano(), 10))
	}
	if h.Prepare != nil {
		h.Prepare(c, attempt, req)
	}
	resp, err := h.client.Do(req)
	o, f := Classify(resp, err)
	if resp != nil {
		if h.Inspect != nil && c != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			h.Inspect(c, resp, body)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if o == Goodput && ctx.Err() != nil {
			o, f = Failed, Timeout // the body arrived after the deadline
		}
	}
	return o, f
}
