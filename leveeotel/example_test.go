package leveeotel_test

import (
	"context"
	"fmt"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveeotel"
)

// cpu is a fixed resource signal for the example.
type cpu struct{}

func (cpu) Name() string    { return "cpu" }
func (cpu) Value() float64  { return 0.4 }
func (cpu) Target() float64 { return 0.8 }

func ExampleObserveAdmit() {
	ctl := admit.New(admit.WithSignals(cpu{}))
	ctl.Step(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	reader := sdkmetric.NewManualReader() // in production: a periodic OTLP reader, or the Prometheus exporter
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := leveeotel.ObserveAdmit(provider.Meter(leveeotel.Scope), ctl)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Unregister()

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == "levee_signal_load_ratio" {
			signal, _ := g.DataPoints[0].Attributes.Value("signal")
			fmt.Printf("%s{signal=%q} %v unit %q\n", m.Name, signal.AsString(), g.DataPoints[0].Value, m.Unit)
		}
	}
	// Output:
	// levee_signal_load_ratio{signal="cpu"} 0.5 unit "1"
}
