package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeResolver answers from tables that a test changes.
type fakeResolver struct {
	mu   sync.Mutex
	ips  map[string][]netip.Addr
	srvs map[string][]*net.SRV
	err  error
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	var out []netip.Addr
	for _, a := range r.ips[host] {
		if u := a.Unmap(); network == "ip" || network == "ip4" && u.Is4() || network == "ip6" && !u.Is4() {
			out = append(out, a)
		}
	}
	return out, nil
}

func (r *fakeResolver) LookupSRV(_ context.Context, _, _, name string) (string, []*net.SRV, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return "", nil, r.err
	}
	return name, r.srvs[name], nil
}

func (r *fakeResolver) set(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f()
}

func mustAddrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, x := range s {
		out = append(out, netip.MustParseAddr(x))
	}
	return out
}

func TestResolve(t *testing.T) {
	r := &fakeResolver{
		ips: map[string][]netip.Addr{
			"api.internal": mustAddrs("10.0.0.2", "10.0.0.1", "fd00::1", "::ffff:10.0.0.3"),
			"a.internal":   mustAddrs("10.0.1.1"),
			"b.internal":   mustAddrs("10.0.1.2", "10.0.1.1"),
		},
		srvs: map[string][]*net.SRV{
			"_http._tcp.api.internal": {{Target: "a.internal.", Port: 8080}, {Target: "b.internal.", Port: 9090}, {Target: "gone.internal.", Port: 1}},
		},
	}
	tests := []struct {
		d    DNS
		want string
	}{
		{DNS{Name: "api.internal:80", Type: "ip"}, "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80 [fd00::1]:80"},
		{DNS{Name: "api.internal:80", Type: "ip4"}, "10.0.0.1:80 10.0.0.2:80 10.0.0.3:80"},
		{DNS{Name: "api.internal:80", Type: "ip6"}, "[fd00::1]:80"},
		{DNS{Name: "_http._tcp.api.internal", Type: "srv"}, "10.0.1.1:8080 10.0.1.1:9090 10.0.1.2:9090"},
	}
	for _, tt := range tests {
		got, err := resolve(context.Background(), r, tt.d)
		if err != nil || strings.Join(got, " ") != tt.want {
			t.Errorf("resolve(%s %s) = %v, %v; want %s", tt.d.Type, tt.d.Name, got, err, tt.want)
		}
	}
	if _, err := resolve(context.Background(), r, DNS{Name: "none.internal:80", Type: "ip"}); !errors.Is(err, errNoAddresses) {
		t.Errorf("no records: %v, want errNoAddresses", err)
	}
}

// TestDNSRefresh: the set follows the records every dns.every; a
// resolver failure or an empty answer keeps the set in force; a backend
// that appears is ramped, one that disappears drains.
func TestDNSRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeResolver{ips: map[string][]netip.Addr{"api.internal": mustAddrs("10.0.0.1", "10.0.0.2")}}
		cfg := DefaultConfig()
		cfg.Backends.DNS = DNS{Name: "api.internal:80", Type: "ip", Every: time.Second, Timeout: 100 * time.Millisecond}
		h, err := New(cfg, WithResolver(r), WithLogger(slog.New(slog.DiscardHandler)),
			WithTransport(func(string) http.RoundTripper { return canned{} }))
		if err != nil {
			t.Fatal(err)
		}
		addrsNow := func() []string {
			var out []string
			for _, b := range h.Status().Backends {
				out = append(out, b.Address+"/"+b.State)
			}
			return out
		}
		if got, want := addrsNow(), []string{"10.0.0.1:80/serving", "10.0.0.2:80/serving"}; !slices.Equal(got, want) {
			t.Fatalf("resolved at New: %v, want %v", got, want)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		step := func(f func()) {
			r.set(f)
			time.Sleep(1500 * time.Millisecond)
		}
		step(func() { r.err = errors.New("SERVFAIL") })
		if got := addrsNow(); len(got) != 2 {
			t.Errorf("after a failed resolution: %v, want the set kept", got)
		}
		step(func() { r.err, r.ips["api.internal"] = nil, nil })
		if got := addrsNow(); len(got) != 2 {
			t.Errorf("after an empty answer: %v, want the set kept", got)
		}
		step(func() { r.ips["api.internal"] = mustAddrs("10.0.0.2", "10.0.0.3") })
		if got, want := addrsNow(), []string{"10.0.0.2:80/serving", "10.0.0.3:80/slow_start"}; !slices.Equal(got, want) {
			t.Errorf("after a change: %v, want %v (10.0.0.1 drained, 10.0.0.3 ramped)", got, want)
		}
		cancel()
		<-done
	})
}
