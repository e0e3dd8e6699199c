package leveehttp_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
)

type exampleCPU struct{}

func (exampleCPU) Name() string    { return "cpu" }
func (exampleCPU) Value() float64  { return 0.4 }
func (exampleCPU) Target() float64 { return 0.8 }

func ExampleStatusHandler() {
	ctl := admit.New(admit.WithSignals(exampleCPU{}))
	ctl.Step(time.Now()) // normally ctl.Run(ctx) does this every period

	status := leveehttp.StatusHandler(ctl)
	defer status.Stop()
	mux := http.NewServeMux()
	mux.Handle("/debug/levee", status) // outside admission control: reachable under overload

	// The page is at /debug/levee; its data at /debug/levee?format=json.
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/levee?format=json&history=0", nil))
	var doc struct {
		Current struct {
			Signals []struct {
				Name        string
				Value, Load float64
			}
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range doc.Current.Signals {
		fmt.Printf("%s: %.1f (%.0f%% of target)\n", s.Name, s.Value, 100*s.Load)
	}
	// Output:
	// cpu: 0.4 (50% of target)
}
