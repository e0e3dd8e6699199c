// Package instrument defines levee's metrics once — name, unit, help text,
// kind and label names — and reads their values from an admission
// controller's Snapshot, a throttle's Stats, a retry budget's Stats and the
// controller's state changes. The two exporters are thin layers over it:
// leveeprom turns each reading into a Prometheus sample, leveeotel into an
// OpenTelemetry observation. A name, a unit or the way a value is derived
// changes here, and both exporters follow.
//
// Names are the Prometheus names (base units, counters ending in _total)
// and also the OpenTelemetry instrument names. Units are UCUM strings, as
// OpenTelemetry wants them, chosen so that OpenTelemetry's standard
// translation to Prometheus names (unit suffixes, _total, _ratio) gives
// back exactly the same name: "s" on the _seconds metrics, "1" on the
// _ratio gauges, annotations such as "{request}" elsewhere (an annotation
// adds no suffix), and "" where the value has no single unit.
//
// This package sits above the policies it reads (admit, throttle, retry)
// and below the adapters; it uses the standard library and levee only.
package instrument
