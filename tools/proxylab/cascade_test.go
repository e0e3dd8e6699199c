package proxylab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/proxy"
)

// memTransport serves requests with in-process handlers, by host, for
// tests on virtual time.
type memTransport map[string]http.Handler

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	h, ok := m[r.URL.Host]
	if !ok {
		return nil, errors.New("no such backend")
	}
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, r)
	}()
	select {
	case <-done:
		res := rec.Result()
		if res.ContentLength < 0 {
			// The body is whole: say how long it is, as net/http does for
			// a small answer. Without it the reverse proxy flushes as for a
			// stream, through time.AfterFunc(-1), which inside the synctest
			// bubble under -race crashed the Go 1.26.8 runtime (SIGSEGV in
			// timer.modify) in 4 of 12 runs of TestCascadeVirtual.
			res.ContentLength = int64(rec.Body.Len())
		}
		return res, nil
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
}

type virtualRun struct {
	ok, sent [levee.NumCriticalities]atomic.Int64
	goodput  atomic.Int64 // successes completed after the warm-up
}

// offer sends Poisson arrivals at rate for d to h through naive clients
// (3 attempts at once, 1 s each), half CRITICAL, half SHEDDABLE, and
// counts what succeeded; successes after warm count towards goodput.
func offer(h http.Handler, rate float64, d, warm time.Duration) *virtualRun {
	res := &virtualRun{}
	rng := rand.New(rand.NewPCG(5, 8))
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		time.Sleep(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if time.Since(start) >= d {
			break
		}
		c := levee.Critical
		if i%2 == 1 {
			c = levee.Sheddable
		}
		res.sent[c].Add(1)
		wg.Go(func() {
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				req := httptest.NewRequestWithContext(ctx, "GET", "/work", nil)
				req.Header.Set("Levee-Criticality", c.String())
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				cancel()
				if rec.Code == http.StatusOK {
					res.ok[c].Add(1)
					if time.Since(start) >= warm {
						res.goodput.Add(1)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	return res
}

// TestCascadeVirtual is the founding text's avalanche on virtual time,
// the same load through both load balancers: three Fixed backends (5
// workers × 50 ms: 300/s together) offered 1.2× their capacity by naive
// retrying clients. The classic balancer takes busy backends for dead
// ones and goodput collapses; levee's proxy ejects nothing, keeps goodput
// near capacity and serves every CRITICAL request.
func TestCascadeVirtual(t *testing.T) {
	const capacity, d, warm = 300.0, 40 * time.Second, 10 * time.Second
	for _, kind := range []string{"classic", "levee"} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memTransport{}
				var addrs []string
				for i := range 3 {
					a := fmt.Sprintf("10.0.0.%d:80", i+1)
					mem[a] = NewFixed(5, 50*time.Millisecond)
					addrs = append(addrs, a)
				}
				ctx, cancel := context.WithCancel(context.Background())
				var loops sync.WaitGroup
				var h http.Handler
				var ejections func() int64
				switch kind {
				case "classic":
					c := NewClassic(ClassicConfig{Backends: addrs, HealthPath: "/healthz", Transport: mem})
					loops.Go(func() { c.Run(ctx) })
					h, ejections = c, c.Ejections
				case "levee":
					cfg := proxy.DefaultConfig()
					for _, a := range addrs {
						cfg.Backends.Static = append(cfg.Backends.Static, proxy.Endpoint{Address: a})
					}
					cfg.Health.Path = "/healthz"
					cfg.Health.Every = time.Second
					p, err := proxy.New(cfg, proxy.WithTransport(func(string) http.RoundTripper { return mem }),
						proxy.WithLogger(slog.New(slog.DiscardHandler)))
					if err != nil {
						t.Fatal(err)
					}
					loops.Go(func() { p.Run(ctx) })
					h = p
					ejections = func() int64 {
						var n int64
						for _, b := range p.Status().Backends {
							n += int64(b.Ejections)
						}
						return n
					}
				}
				res := offer(h, 1.2*capacity, d, warm)
				cancel()
				loops.Wait()
				time.Sleep(time.Minute) // the backends finish their queues
				gp := float64(res.goodput.Load()) / (d - warm).Seconds() / capacity
				crit := float64(res.ok[levee.Critical].Load()) / float64(res.sent[levee.Critical].Load())
				t.Logf("%s: goodput %.2f of capacity, CRITICAL success %.3f, ejections %d", kind, gp, crit, ejections())
				switch kind {
				case "classic":
					if ejections() == 0 || gp > 0.7 {
						t.Errorf("the classic balancer did not collapse (goodput %.2f, %d ejections): the model lost the avalanche", gp, ejections())
					}
				case "levee":
					if ejections() != 0 || gp < 0.85 || crit < 0.99 {
						t.Errorf("levee: goodput %.2f (want ≥ 0.85), CRITICAL %.3f (want ≥ 0.99), %d ejections (want 0)", gp, crit, ejections())
					}
				}
			})
		})
	}
}
