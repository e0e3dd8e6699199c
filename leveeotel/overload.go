package leveeotel

import (
	"errors"

	"go.opentelemetry.io/otel/metric"

	"github.com/levee-dev/levee/internal/instrument"
	"github.com/levee-dev/levee/overload"
)

// ObserveOverload observes an overload.Manager through meter: the
// instruments of leveeprom's OverloadCollector, from one Manager.Status
// per collection. It returns an error for a nil meter or manager, a
// reserved attribute key, or an instrument the meter refuses.
func ObserveOverload(meter metric.Meter, m *overload.Manager, opts ...Option) (metric.Registration, error) {
	if m == nil {
		return nil, errors.New("leveeotel: ObserveOverload with a nil manager")
	}
	return observe(meter, instrument.OverloadMetrics, func(emit instrument.Emit) {
		instrument.ReadOverload(m.Status(), emit)
	}, opts)
}
