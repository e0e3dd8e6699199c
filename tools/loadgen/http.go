package loadgen

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/levee-dev/levee"
)

// DeadlineHeader carries the absolute deadline of an attempt's client, in
// Unix nanoseconds, so that a test backend on the same machine can count the
// handler runs that finish after their client has given up. It is a
// measurement aid of this harness, not part of levee's wire protocol.
const DeadlineHeader = "Loadgen-Deadline"

// rejectHeader is levee's explicit-rejection response header (DESIGN.md).
const rejectHeader = "Levee-Reject"

// NewTransport returns a keep-alive HTTP/1.1 transport for loopback load:
// no proxy, no compression, an idle pool large enough that connections are
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

// Classify maps the result of an HTTP exchange to an Outcome: a 2xx is
// Goodput; a 429, 503 or 504 carrying levee's Levee-Reject header, or a
// levee rejection error, is Rejected (Throttled if the client refused it
// locally); a local resource error (no file descriptor, no port) is
// GenError; everything else is Failed. It does not read or close the body.
func Classify(resp *http.Response, err error) Outcome {
	if err != nil {
		if r := levee.AsRejected(err); r != nil {
			if r.Reason == levee.Throttled {
				return Throttled
			}
			return Rejected
		}
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.EADDRNOTAVAIL) {
			return GenError
		}
		return Failed
	}
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return Goodput
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
		if resp.Header.Get(rejectHeader) != "" {
			return Rejected
		}
	}
	return Failed
}

// get sends one GET with the deadline header set from ctx and returns the
// classified outcome, having drained and closed the body.
func get(ctx context.Context, client *http.Client, url string) Outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return GenError
	}
	if dl, ok := ctx.Deadline(); ok {
		req.Header.Set(DeadlineHeader, strconv.FormatInt(dl.UnixNano(), 10))
	}
	resp, err := client.Do(req)
	o := Classify(resp, err)
	if resp != nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if o == Goodput && ctx.Err() != nil {
			o = Failed // the body arrived after the deadline
		}
	}
	return o
}

// Naive returns a Func for the client levee exists to replace: every
// attempt gets its own timeout, and any failure is retried immediately up
// to retries times, with no backoff, no budget and no throttling. client's
// transport should be wrapped with CountAttempts.
func Naive(client *http.Client, url string, timeout time.Duration, retries int) Func {
	return func(ctx context.Context, c *Call) Outcome {
		o := Failed
		for a := 0; a <= retries; a++ {
			actx, cancel := context.WithTimeout(ctx, timeout)
			o = get(actx, client, url)
			cancel()
			if o == Goodput || o == GenError || ctx.Err() != nil {
				return o
			}
		}
		return o
	}
}

// Single returns a Func that sends one logical request with an overall
// deadline of timeout and leaves retries, throttling and budgets to client's
// transport (for example leveehttp.NewTransport over CountAttempts).
func Single(client *http.Client, url string, timeout time.Duration) Func {
	return func(ctx context.Context, c *Call) Outcome {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return get(ctx, client, url)
	}
}

// Once returns a function that sends one GET to url through client with a
// timeout, for Closed.
func Once(client *http.Client, url string, timeout time.Duration) func(ctx context.Context) Outcome {
	return func(ctx context.Context) Outcome {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return get(ctx, client, url)
	}
}
