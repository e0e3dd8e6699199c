package proxy

import (
	"context"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee/internal/wire"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestProbe: what an active check makes of each answer. A busy backend
// (a levee rejection, a 429, a timeout while it answers proxied requests)
// is alive; only failures count towards ejection.
func TestProbe(t *testing.T) {
	hang := func(answering bool) func(b *backend) http.RoundTripper {
		return func(b *backend) http.RoundTripper {
			return rtFunc(func(r *http.Request) (*http.Response, error) {
				if answering {
					b.observe(answered, time.Millisecond)
				}
				<-r.Context().Done()
				return nil, r.Context().Err()
			})
		}
	}
	answer := func(code int, kv ...string) func(*backend) http.RoundTripper {
		return func(*backend) http.RoundTripper {
			return rtFunc(func(r *http.Request) (*http.Response, error) { return respond(r, code, kv...), nil })
		}
	}
	tests := []struct {
		name string
		rt   func(*backend) http.RoundTripper
		want checkResult
	}{
		{"200", answer(200), checkHealthy},
		{"204", answer(204), checkHealthy},
		{"503 overloaded", answer(503, wire.Reject, "overloaded"), checkOverloaded},
		{"429", answer(429), checkOverloaded},
		{"503 without Levee-Reject (not ready)", answer(503), checkFailed},
		{"404", answer(404), checkFailed},
		{"500", answer(500), checkFailed},
		{"refused", func(*backend) http.RoundTripper {
			return rtFunc(func(*http.Request) (*http.Response, error) { return nil, errRefused })
		}, checkFailed},
		{"timeout while answering traffic", hang(true), checkOverloaded},
		{"timeout, no traffic answered", hang(false), checkFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &backend{addr: "a.test:80"}
				b.rt = tt.rt(b)
				h := &Handler{}
				if got := h.probe(context.Background(), b, Health{Path: "/healthz", Timeout: time.Second}); got != tt.want {
					t.Errorf("probe = %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// TestThrottleBackend: a backend that rejects everything for overload is
// soon sent only a trickle (the throttle refuses the rest locally,
// answered "overloaded; no-retry"), and is sent everything again soon
// after it recovers.
func TestThrottleBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got, sent int
		overloaded := true
		b := rtFunc(func(r *http.Request) (*http.Response, error) {
			got++
			if overloaded {
				return respond(r, 503, wire.Reject, "overloaded"), nil
			}
			return respond(r, 200), nil
		})
		cfg := DefaultConfig()
		cfg.Backends.Static = []Endpoint{{Address: "a.test:80"}}
		h, err := New(cfg, WithTransport(func(string) http.RoundTripper { return b }), WithLogger(discard()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		send := func(d time.Duration) (ok, local int) {
			got = 0
			for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
				rec := httptestRecorder(h, "GET", "/r")
				sent++
				switch {
				case rec.Code == 200:
					ok++
				case rec.Header().Get(HeaderError) == "gave-up":
					local++
				}
			}
			return ok, local
		}
		send(10 * time.Second) // the throttle learns
		_, local := send(10 * time.Second)
		if got > 500 || local < 300 {
			t.Errorf("overloaded backend: sent %d of 1000 (want ≤ half), %d refused locally", got, local)
		}
		overloaded = false
		send(2 * time.Second)
		ok, _ := send(5 * time.Second)
		if ok < 490 {
			t.Errorf("after recovery: %d of 500 served, want nearly all", ok)
		}
		cancel()
		<-done
	})
}
