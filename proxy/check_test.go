package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCheck: every problem is reported, each naming its field as the
// file writes it.
func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(c *Config)
		want   []string
	}{
		{"no backends", func(c *Config) { c.Backends.Static = nil }, []string{"proxy.backends: give the backends"}},
		{"both static and dns", func(c *Config) { c.Backends.DNS.Name = "api:80" }, []string{"proxy.backends: give static or dns.name, not both"}},
		{"bad address", func(c *Config) { c.Backends.Static[1].Address = "10.0.0.2" },
			[]string{`proxy.backends.static[1].address: must be host:port, got "10.0.0.2"`}},
		{"bad port", func(c *Config) { c.Backends.Static[0].Address = "a:99999" },
			[]string{`proxy.backends.static[0].address: must be host:port, got "a:99999": port "99999" is not a number in 1..65535`}},
		{"duplicate", func(c *Config) { c.Backends.Static[1].Address = "10.0.0.1:80" },
			[]string{`proxy.backends.static[1].address: "10.0.0.1:80" is listed twice (also backends.static[0])`}},
		{"several at once", func(c *Config) {
			c.Outlier.MaxEjectedShare = 1.5
			c.Limit.Min = 0
			c.Health.Path = "healthz"
			c.Retry.Cap = time.Millisecond
		}, []string{
			"proxy.limit.min: must be in [1, 1000], got 0",
			`proxy.health.path: must be empty or start with /, got "healthz"`,
			"proxy.outlier.max_ejected_share: must be in [0, 1], got 1.5",
			"proxy.retry.cap: must be in [5ms, 1m0s], got 1ms",
		}},
		{"srv with a port", func(c *Config) {
			c.Backends.Static = nil
			c.Backends.DNS = DNS{Name: "_http._tcp.api:80", Type: "srv", Every: time.Second, Timeout: time.Second}
		}, []string{`proxy.backends.dns.name: an SRV name has no port (the records give it), got "_http._tcp.api:80"`}},
		{"unknown protocol", func(c *Config) { c.Backends.Protocol = "h3" },
			[]string{`proxy.backends.protocol: must be one of http1, h2c, got "h3"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Backends.Static = []Endpoint{{Address: "10.0.0.1:80"}, {Address: "10.0.0.2:80"}}
			tt.change(c)
			err := c.Check()
			if err == nil {
				t.Fatalf("Check() = nil, want %d problems", len(tt.want))
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tt.want) {
				t.Fatalf("problems:\n%s\nwant %d", err, len(tt.want))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("problem %d: %q, want it to start with %q", i, got[i], tt.want[i])
				}
			}
		})
	}
	c := DefaultConfig()
	c.Backends.Static = []Endpoint{{Address: "10.0.0.1:80"}}
	if err := c.Check(); err != nil {
		t.Errorf("defaults with a backend: %v", err)
	}
}

func TestRestartChanges(t *testing.T) {
	a := DefaultConfig()
	b := DefaultConfig()
	b.Limit.Window = time.Second
	b.Backends.Protocol = "h2c"
	b.Outlier.MaxEjectedShare = 0.3 // reloadable
	got := strings.Join(restartChanges(a, b), ",")
	if want := "backends.protocol,limit.window"; got != want {
		t.Errorf("restartChanges = %q, want %q", got, want)
	}
}

// TestApply: a reload changes the backends and the limits' bounds at
// once; a change to a restart-only field is refused whole.
func TestApply(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Backends.Static = []Endpoint{{Address: "a.test:80"}, {Address: "b.test:80"}}
	h, err := New(cfg, WithTransport(func(string) http.RoundTripper { return canned{} }), WithLogger(discard()))
	if err != nil {
		t.Fatal(err)
	}
	next := DefaultConfig()
	next.Backends.Static = []Endpoint{{Address: "b.test:80"}, {Address: "c.test:80"}}
	next.Limit.Max, next.Limit.Initial = 10, 10
	next.Throttle.K = 1.5
	if err := h.Apply(next); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, b := range h.Status().Backends {
		got = append(got, fmt.Sprintf("%s/%s/%d", b.Address, b.State, b.Limit))
	}
	// a.test had nothing in flight: drained and dropped at once.
	if want := "b.test:80/serving/10 c.test:80/slow_start/10"; strings.Join(got, " ") != want {
		t.Errorf("after the reload: %s, want %s", strings.Join(got, " "), want)
	}
	bad := DefaultConfig()
	bad.Backends.Static = next.Backends.Static
	bad.Limit.Window = time.Second
	bad.Outlier.MaxEjectedShare = 0.2
	if err := h.Apply(bad); err == nil || !strings.Contains(err.Error(), "limit.window") {
		t.Errorf("restart-only change: %v, want refused naming limit.window", err)
	}
	if got := h.settings.Load().cfg.Outlier.MaxEjectedShare; got != 0.5 {
		t.Errorf("a refused reload changed max_ejected_share to %v", got)
	}
}
