package leveeprom

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// observedController returns a controller with the observer hook, a logger
// and the metrics collector attached (registered and scraped once), or a
// bare one.
func observedController(tb testing.TB, observed bool) *admit.Controller {
	tb.Helper()
	sig := &fixedSignal{name: "cpu", value: 0.5, target: 0.8}
	opts := []admit.Option{admit.WithSignals(sig)}
	ev := NewEventCollector()
	if observed {
		opts = append(opts,
			admit.WithObserver(ev.Observe),
			admit.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		)
	}
	ctl := admit.New(opts...)
	ctl.Step(t0)
	if observed {
		reg := prometheus.NewRegistry()
		reg.MustRegister(NewAdmitCollector(ctl), ev)
		if _, err := reg.Gather(); err != nil {
			tb.Fatal(err)
		}
	}
	return ctl
}

// BenchmarkAccept measures one admission decision (Admit + Done) with and
// without the observer, logger and metrics attached, as paired
// sub-benchmarks of one run:
//
//	go test -run '^$' -bench '^BenchmarkAccept$' -benchmem -count 10 ./leveeprom
//
// The metrics read Controller.Snapshot at scrape time and the observer is
// called from Step only, so the two should cost the same and allocate
// nothing.
func BenchmarkAccept(b *testing.B) {
	for _, bc := range []struct {
		name     string
		observed bool
	}{{"observer=off", false}, {"observer=on", true}} {
		b.Run(bc.name, func(b *testing.B) {
			ctl := observedController(b, bc.observed)
			ctx := levee.WithCriticality(context.Background(), levee.Critical)
			b.ReportAllocs()
			for b.Loop() {
				tk, err := ctl.Admit(ctx)
				if err == nil {
					tk.Done(nil)
				}
			}
		})
	}
}

// BenchmarkAcceptInterleaved measures the same two controllers in
// alternating blocks of admissions within one benchmark, so that the load
// of a shared machine weighs on both alike, and reports each one's ns per
// admission and their ratio (on ÷ off):
//
//	go test -run '^$' -bench '^BenchmarkAcceptInterleaved$' -count 10 ./leveeprom
func BenchmarkAcceptInterleaved(b *testing.B) {
	const block = 512
	ctls := [2]*admit.Controller{observedController(b, false), observedController(b, true)}
	ctx := levee.WithCriticality(context.Background(), levee.Critical)
	var spent [2]time.Duration
	run := func(i int) {
		ctl := ctls[i]
		start := time.Now()
		for range block {
			tk, err := ctl.Admit(ctx)
			if err == nil {
				tk.Done(nil)
			}
		}
		spent[i] += time.Since(start)
	}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		first := n % 2 // alternate which goes first
		run(first)
		run(1 - first)
		n++
	}
	ops := float64(n * block)
	b.ReportMetric(float64(spent[0].Nanoseconds())/ops, "off-ns/admit")
	b.ReportMetric(float64(spent[1].Nanoseconds())/ops, "on-ns/admit")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "on/off")
}

func TestAcceptObservedAllocs(t *testing.T) {
	for _, observed := range []bool{false, true} {
		ctl := observedController(t, observed)
		ctx := levee.WithCriticality(context.Background(), levee.Critical)
		allocs := testing.AllocsPerRun(1000, func() {
			tk, err := ctl.Admit(ctx)
			if err == nil {
				tk.Done(nil)
			}
		})
		if allocs != 0 {
			t.Errorf("observed=%v: %v allocs per admission, want 0", observed, allocs)
		}
	}
}
