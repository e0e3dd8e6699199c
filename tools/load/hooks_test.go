package load

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestPrepareAndDial checks HTTP's hooks: Prepare sees every attempt
// after levee's headers are set and its changes reach the server; Dial
// opens the connections (here from another loopback address).
func TestPrepareAndDial(t *testing.T) {
	var mu sync.Mutex
	var remotes, tenants []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		mu.Lock()
		remotes = append(remotes, host)
		tenants = append(tenants, r.Header.Get("Levee-Tenant"))
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	local := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	var dials int
	h, err := NewHTTP(HTTP{
		URL: srv.URL, Client: ClientNaive, Retries: 1, Timeout: time.Second,
		Prepare: func(c *Call, attempt int, r *http.Request) {
			// Runs after the Mix's tenant was set: replaces it.
			r.Header.Set("Levee-Tenant", c.Tenant+"-"+strconv.Itoa(attempt))
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			dials++
			mu.Unlock()
			return (&net.Dialer{LocalAddr: local}).DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.CloseIdleConnections()
	c := &Call{Tenant: "acme"}
	if o := h.Func()(context.Background(), c); o != Failed {
		t.Fatalf("outcome %v, want failed (the server answers 500)", o)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(tenants) != 2 || tenants[0] != "acme-0" || tenants[1] != "acme-1" {
		t.Errorf("tenants seen %q, want [acme-0 acme-1]", tenants)
	}
	for _, r := range remotes {
		if r != "127.0.0.2" {
			t.Errorf("remote address %s, want 127.0.0.2 (Dial's)", r)
		}
	}
	if dials < 1 {
		t.Errorf("Dial called %d times, want ≥ 1", dials)
	}
}
