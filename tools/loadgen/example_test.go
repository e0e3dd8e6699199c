package loadgen_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/levee-dev/levee/tools/loadgen"
)

// Drive a short open-loop schedule against a test server with naive
// clients and read the totals of each phase.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	client := &http.Client{Transport: loadgen.CountAttempts(loadgen.NewTransport())}
	ok := loadgen.Naive(client, srv.URL+"/ok", time.Second, 2)
	busy := loadgen.Naive(client, srv.URL+"/busy", time.Second, 2)
	rep, err := loadgen.Run(context.Background(), loadgen.Config{
		Phases: []loadgen.Phase{
			{Name: "fine", Rate: 100, Duration: 100 * time.Millisecond},
			{Name: "failing", Rate: 50, Duration: 100 * time.Millisecond},
		},
		Do: func(ctx context.Context, c *loadgen.Call) loadgen.Outcome {
			if c.Phase == 1 {
				return busy(ctx, c)
			}
			return ok(ctx, c)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range rep.Phases {
		fmt.Printf("%s: offered %d, attempted %d, goodput %d, failed %d\n", p.Name, p.Offered, p.Attempted, p.Goodput, p.Failed)
	}
	// Output:
	// fine: offered 10, attempted 10, goodput 10, failed 0
	// failing: offered 5, attempted 15, goodput 0, failed 5
}
