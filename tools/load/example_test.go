package load_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/levee-dev/levee/tools/load"
)

// Drive a short open-loop schedule against a test server with naive
// clients (2 immediate retries) and read each phase in levee's report
// schema.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	}))
	defer srv.Close()

	ok, err := load.NewHTTP(load.HTTP{URL: srv.URL + "/ok", Client: load.ClientNaive, Retries: 2, Timeout: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	busy, err := load.NewHTTP(load.HTTP{URL: srv.URL + "/busy", Client: load.ClientNaive, Retries: 2, Timeout: time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := load.Run(context.Background(), load.Config{
		Phases: []load.Phase{
			{Name: "fine", Rate: 100, Duration: 100 * time.Millisecond},
			{Name: "failing", Rate: 50, Duration: 100 * time.Millisecond},
		},
		Do: func(ctx context.Context, c *load.Call) load.Outcome {
			if c.Phase == 1 {
				return busy.Func()(ctx, c)
			}
			return ok.Func()(ctx, c)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	run := res.Run()
	for _, p := range run.Phases {
		fmt.Printf("%s: offered %.0f/s, attempted %.0f/s, goodput %.0f/s, failed %.0f/s %v\n",
			p.Name, p.OfferedRPS, p.AttemptedRPS, p.GoodputRPS, p.FailedRPS, p.FailedBy)
	}
	// Output:
	// fine: offered 100/s, attempted 100/s, goodput 100/s, failed 0/s map[]
	// failing: offered 50/s, attempted 150/s, goodput 0/s, failed 50/s map[status_5xx:50]
}
