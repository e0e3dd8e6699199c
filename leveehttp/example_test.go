package leveehttp_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
)

// A server admits requests through a controller; a client carries
// criticality and deadline to it.
func Example() {
	ctl := admit.New() // in production: admit.WithSignals(...), go ctl.Run(ctx)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := levee.CallFrom(r.Context())
		_, hasDeadline := r.Context().Deadline()
		fmt.Fprintln(w, call.Criticality, call.Tenant, hasDeadline)
	})
	srv := httptest.NewServer(leveehttp.NewHandler(api, ctl))
	defer srv.Close()

	client := &http.Client{Transport: leveehttp.NewTransport(nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	ctx = levee.WithCriticality(ctx, levee.SheddablePlus)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// The caller is not trusted: its tenant is its /24.
	fmt.Print(string(body))
	// Output: SHEDDABLE_PLUS 127.0.0.0/24 true
}

// A client sees a levee rejection as a *levee.RejectedError inside the
// *url.Error that http.Client returns.
func ExampleNewTransport() {
	overloaded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leveehttp.WriteRejection(w, &levee.RejectedError{Reason: levee.Overloaded, NoRetry: true})
	})
	srv := httptest.NewServer(overloaded)
	defer srv.Close()

	client := &http.Client{Transport: leveehttp.NewTransport(nil)}
	_, err := client.Get(srv.URL)
	var rej *levee.RejectedError
	fmt.Println(errors.As(err, &rej), rej.Reason, rej.NoRetry)
	// Output: true overloaded true
}

// A mid-tier answers its caller by the mapping table: its dependency's
// overload becomes "overloaded; no-retry", so nobody above retries.
func ExampleError() {
	downstream := &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: 2 * time.Second}
	for _, err := range []error{downstream, levee.ErrThrottled, &levee.RejectedError{Reason: levee.Quota, RetryAfter: time.Second}, context.DeadlineExceeded} {
		w := httptest.NewRecorder()
		leveehttp.Error(w, httptest.NewRequest("GET", "/", nil), err)
		fmt.Println(w.Code, w.Header().Get("Levee-Reject"))
	}
	// Output:
	// 503 overloaded; no-retry
	// 503 overloaded; no-retry
	// 429 quota
	// 504 deadline; no-retry
}

// Health and readiness probes (GET or HEAD on exactly the listed paths) are
// never shed, even when the budget has already expired. WithHealthPaths
// replaces the default list: extend DefaultHealthPaths to keep it.
func ExampleWithHealthPaths() {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") })
	h := leveehttp.NewHandler(ok, admit.New(),
		leveehttp.WithHealthPaths(append(leveehttp.DefaultHealthPaths(), "/ping")...))
	for _, req := range []struct{ method, path string }{
		{"GET", "/ping"}, {"HEAD", "/healthz"}, {"POST", "/ping"}, {"GET", "/ping/deep"}, {"GET", "/work"},
	} {
		r := httptest.NewRequest(req.method, req.path, nil)
		r.Header.Set("Levee-Timeout-Ms", "0")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(req.method, req.path, w.Code)
	}
	fmt.Println("probes:", h.Probes())
	// Output:
	// GET /ping 200
	// HEAD /healthz 200
	// POST /ping 504
	// GET /ping/deep 504
	// GET /work 504
	// probes: 2
}
