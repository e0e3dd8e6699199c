package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/levee-dev/levee/internal/wire"
)

// scheduleChecks starts the active health checks that are due at now, at
// most one in flight per backend. Each backend's next check comes Every
// later, jittered by ±Jitter, so that checks of many backends (and of many
// proxies) do not fall together.
func (h *Handler) scheduleChecks(ctx context.Context, now time.Time, wg *sync.WaitGroup) {
	s := h.settings.Load()
	hc := s.cfg.Health
	if hc.Path == "" {
		return
	}
	for _, b := range *h.bal.set.Load() {
		next := b.nextCheck.Load()
		if next == 0 {
			// First sight: spread the first checks over one period.
			b.nextCheck.Store(now.Add(time.Duration(h.uniform() * float64(hc.Every))).UnixNano())
			continue
		}
		if now.UnixNano() < next || !b.checking.CompareAndSwap(false, true) {
			continue
		}
		wg.Go(func() {
			defer b.checking.Store(false)
			res := h.probe(ctx, b, hc)
			if ctx.Err() != nil {
				return
			}
			b.health.record(res)
			wait := float64(hc.Every) * (1 + hc.Jitter*(2*h.uniform()-1))
			b.nextCheck.Store(h.now().Add(time.Duration(wait)).UnixNano())
			if res == checkFailed {
				h.log.Debug("proxy: health check failed", "backend", b.addr, "in_a_row", b.health.failRun.Load())
			}
		})
	}
}

func (h *Handler) uniform() float64 { return float64(h.rand()>>11) / (1 << 53) }

// probe runs one active health check of b: GET path. A 2xx is healthy; a
// levee rejection (503 or 429 with Levee-Reject) or a 429 is overloaded,
// which is alive; a timeout while b answered proxied requests during the
// check is overloaded too (its checks wait in the same queue as its
// traffic: that is how the founding text's avalanche ejects busy
// backends); anything else fails.
func (h *Handler) probe(ctx context.Context, b *backend, hc Health) checkResult {
	before := b.count[answered].Load()
	cctx, cancel := context.WithTimeout(ctx, hc.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, "http://"+b.addr+hc.Path, nil)
	if err != nil {
		return checkFailed
	}
	req.Header.Set("User-Agent", "levee-proxy-health")
	resp, err := b.rt.RoundTrip(req)
	if err != nil {
		var ne net.Error
		timeout := errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
		if timeout && b.count[answered].Load() > before {
			return checkOverloaded
		}
		return checkFailed
	}
	drain(resp.Body)
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return checkHealthy
	case resp.StatusCode == http.StatusTooManyRequests:
		return checkOverloaded
	case resp.StatusCode == http.StatusServiceUnavailable:
		if _, _, ok := wire.ParseReject(resp.Header[wire.Reject]); ok {
			return checkOverloaded
		}
	}
	return checkFailed
}
