package proxylab

import (
	"context"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// ClassicConfig configures Classic; the zero value of a field means the
// default in brackets, the settings of a typical hand-configured load
// balancer (HAProxy's inter/fall/rise, nginx's max_fails/fail_timeout).
type ClassicConfig struct {
	// HealthPath is checked with GET every Interval [1s], each check
	// bounded by Timeout [1s]; Fall [2] failures in a row take a backend
	// out, Rise [2] successes bring it back. "" checks nothing.
	HealthPath     string
	Interval       time.Duration
	Timeout        time.Duration
	Fall, Rise     int
	MaxFails       int           // proxied errors or timeouts that take a backend out [3]
	FailTimeout    time.Duration // the window of MaxFails, and how long it stays out [10s]
	ProxyTimeout   time.Duration // wait for a backend's response headers [1s]
	Backends       []string      // host:port
	MaxIdlePerHost int           // keep-alive connections per backend [256]
	// Transport sends to the backends; nil means an http.Transport of
	// MaxIdlePerHost connections per backend.
	Transport http.RoundTripper `json:"-"`
}

func (c *ClassicConfig) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(d *int, v int) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Interval, time.Second)
	def(&c.Timeout, time.Second)
	def(&c.FailTimeout, 10*time.Second)
	def(&c.ProxyTimeout, time.Second)
	defInt(&c.Fall, 2)
	defInt(&c.Rise, 2)
	defInt(&c.MaxFails, 3)
	defInt(&c.MaxIdlePerHost, 256)
}

// Classic is the load balancer the founding text's avalanche runs through,
// built on httputil.ReverseProxy: round robin over the backends in
// rotation; a backend whose health checks fail (time out) or whose proxied
// requests fail or time out is taken out, and its traffic goes to the
// others; nothing caps how many are out, and when all are, requests are
// answered 502. It is safe for concurrent use.
type Classic struct {
	cfg      ClassicConfig
	backends []*classicBackend
	rr       atomic.Uint64
	rp       *httputil.ReverseProxy
	tr       http.RoundTripper
	ejected  atomic.Int64 // ejections so far
}

type classicBackend struct {
	url   *url.URL
	down  atomic.Bool
	mu    sync.Mutex
	fails []time.Time // proxied failures within FailTimeout
	until time.Time   // passive ejection end
	okRun int         // health successes in a row (checker only)
	bad   int         // health failures in a row (checker only)
}

type backendKey struct{}

// NewClassic returns a Classic balancer over cfg.Backends.
func NewClassic(cfg ClassicConfig) *Classic {
	cfg.defaults()
	c := &Classic{cfg: cfg}
	for _, a := range cfg.Backends {
		c.backends = append(c.backends, &classicBackend{url: &url.URL{Scheme: "http", Host: a}})
	}
	c.tr = cfg.Transport
	if c.tr == nil {
		c.tr = &http.Transport{MaxIdleConnsPerHost: cfg.MaxIdlePerHost}
	}
	c.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			b := pr.In.Context().Value(backendKey{}).(*classicBackend)
			pr.SetURL(b.url)
			pr.SetXForwarded()
		},
		Transport: classicTransport{c},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return c
}

// Ejections returns how many times a backend was taken out.
func (c *Classic) Ejections() int64 { return c.ejected.Load() }

// Down returns how many backends are out now.
func (c *Classic) Down() int {
	n := 0
	for _, b := range c.backends {
		if b.down.Load() {
			n++
		}
	}
	return n
}

func (c *Classic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := len(c.backends)
	start := c.rr.Add(1)
	for i := range n {
		b := c.backends[(int(start)+i)%n]
		if b.available(time.Now()) {
			c.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), backendKey{}, b)))
			return
		}
	}
	http.Error(w, "no healthy upstream", http.StatusBadGateway)
}

func (b *classicBackend) available(now time.Time) bool {
	if b.down.Load() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !now.Before(b.until)
}

type classicTransport struct{ c *Classic }

// RoundTrip sends r to its backend, waiting at most ProxyTimeout for the
// response headers, and counts a failure or a timeout against it.
func (t classicTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	b := r.Context().Value(backendKey{}).(*classicBackend)
	ctx, cancel := context.WithCancel(r.Context())
	timer := time.AfterFunc(t.c.cfg.ProxyTimeout, cancel)
	resp, err := t.c.tr.RoundTrip(r.WithContext(ctx))
	timedOut := !timer.Stop()
	if err != nil || resp.StatusCode >= 500 {
		if r.Context().Err() == nil || timedOut {
			t.c.fail(b, time.Now())
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelBody{resp.Body, cancel}
	return resp, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// fail records a proxied failure; MaxFails of them within FailTimeout
// take b out for FailTimeout.
func (c *Classic) fail(b *classicBackend, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := b.fails[:0]
	for _, t := range b.fails {
		if now.Sub(t) < c.cfg.FailTimeout {
			keep = append(keep, t)
		}
	}
	b.fails = append(keep, now)
	if len(b.fails) >= c.cfg.MaxFails && !now.Before(b.until) {
		b.until = now.Add(c.cfg.FailTimeout)
		b.fails = b.fails[:0]
		c.ejected.Add(1)
	}
}

// Run checks the backends' health until ctx ends.
func (c *Classic) Run(ctx context.Context) {
	if c.cfg.HealthPath == "" {
		return
	}
	client := &http.Client{Transport: c.tr, Timeout: c.cfg.Timeout}
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var wg sync.WaitGroup
		for _, b := range c.backends {
			wg.Go(func() { c.check(ctx, client, b) })
		}
		wg.Wait()
	}
}

func (c *Classic) check(ctx context.Context, client *http.Client, b *classicBackend) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.url.String()+c.cfg.HealthPath, nil)
	resp, err := client.Do(req)
	ok := err == nil && resp.StatusCode < 400
	if err == nil {
		resp.Body.Close()
	}
	if ctx.Err() != nil {
		return
	}
	if ok {
		b.bad = 0
		b.okRun++
		if b.down.Load() && b.okRun >= c.cfg.Rise {
			b.down.Store(false)
		}
		return
	}
	b.okRun = 0
	b.bad++
	if !b.down.Load() && b.bad >= c.cfg.Fall {
		b.down.Store(true)
		c.ejected.Add(1)
	}
}
