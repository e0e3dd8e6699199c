package leveeprom_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveeprom"
	"github.com/levee-dev/levee/throttle"
)

// cpu is a fixed resource signal for the example.
type cpu struct{}

func (cpu) Name() string    { return "cpu" }
func (cpu) Value() float64  { return 0.4 }
func (cpu) Target() float64 { return 0.8 }

func ExampleNewAdmitCollector() {
	ctl := admit.New(admit.WithSignals(cpu{}))
	ctl.Step(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	reg := prometheus.NewRegistry() // yours, never the global one
	reg.MustRegister(leveeprom.NewAdmitCollector(ctl))

	out, err := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain, "levee_signal_load_ratio")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(out))
	// Output:
	// # HELP levee_signal_load_ratio Signal value / target (1 = at target): how much of the signal's headroom is used.
	// # TYPE levee_signal_load_ratio gauge
	// levee_signal_load_ratio{signal="cpu"} 0.5
}

func ExampleThrottleCollector() {
	backends := throttle.NewGroup()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 3 {
		t := backends.Get("search")
		if t.AllowAt(now, levee.Critical) == nil {
			t.DoneAt(now, levee.Critical, true) // the backend served it
		}
	}

	tc := leveeprom.NewThrottleCollector()
	tc.AddGroup(backends)
	reg := prometheus.NewRegistry()
	reg.MustRegister(tc)

	out, _ := testutil.GatherAndFormat(reg, expfmt.TypeTextPlain, "levee_throttle_requests_total")
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, `"CRITICAL"`) {
			fmt.Println(line)
		}
	}
	// Output:
	// levee_throttle_requests_total{backend="search",criticality="CRITICAL"} 3
}
