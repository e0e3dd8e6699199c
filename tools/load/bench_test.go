package load

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkRunNoop measures the generator's own cost per arrival (the
// schedule, a goroutine, the counters, the histograms) with a request
// function that does nothing: arrivals are offered faster than the
// generator can send them, so the time per arrival is its cost.
func BenchmarkRunNoop(b *testing.B) {
	b.ReportAllocs()
	noop := func(ctx context.Context, c *Call) Outcome { c.Attempt(); return Goodput }
	rate := float64(CeilingRate)
	d := time.Duration(float64(b.N) / rate * float64(time.Second))
	if d < time.Millisecond {
		d = time.Millisecond
	}
	b.ResetTimer()
	res, err := Run(context.Background(), Config{
		Phases: []Phase{{Name: "noop", Rate: rate, Duration: d}},
		Do:     noop,
		Limits: Limits{MaxRate: CeilingRate},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if res.Phases[0].Offered == 0 {
		b.Fatal("nothing offered")
	}
}

// BenchmarkHTTPFunc measures one request of the none client model through
// the counting keep-alive transport to a trivial in-process server,
// client and server together.
func BenchmarkHTTPFunc(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	h, err := NewHTTP(HTTP{URL: srv.URL, Client: ClientNone})
	if err != nil {
		b.Fatal(err)
	}
	defer h.CloseIdleConnections()
	do := h.Func()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if o := do(context.Background(), &Call{}); o != Goodput {
				b.Fatalf("outcome %v", o)
			}
		}
	})
}
