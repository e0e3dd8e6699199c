package inbound_test

import (
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/levee-dev/levee/internal/inbound"
)

// A protocol adapter builds its Rules once and derives each request's call
// with them.
func Example() {
	var peers inbound.Peers
	names := [inbound.NumKeys]string{
		inbound.Criticality: "Levee-Criticality", inbound.Tenant: "Levee-Tenant",
		inbound.Attempt: "Levee-Attempt", inbound.TimeoutMs: "Levee-Timeout-Ms",
		inbound.GRPCTimeout: "Grpc-Timeout", inbound.EnvoyTimeoutMs: "X-Envoy-Expected-Rq-Timeout-Ms",
	}
	rules := inbound.Rules[*http.Request]{
		Header: func(r *http.Request, k inbound.Key) []string { return r.Header[names[k]] },
		Peer: func(r *http.Request) (string, netip.Addr) {
			a := inbound.Addr(r.RemoteAddr)
			return peers.Tenant(a), a
		},
	}
	r, _ := http.NewRequest("GET", "http://svc/", nil)
	r.RemoteAddr = "198.51.100.9:4711"
	r.Header.Set("Levee-Criticality", "CRITICAL_PLUS") // untrusted: capped
	r.Header.Set("Levee-Tenant", "someone-else")       // untrusted: ignored
	r.Header.Set("Levee-Timeout-Ms", "800")
	r.Header.Set("X-Envoy-Expected-Rq-Timeout-Ms", "500") // the minimum wins
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got, err := rules.Derive(r, now, now)
	fmt.Println(got.Call.Criticality, got.Call.Tenant, got.Deadline.Sub(now), err)
	// Output: CRITICAL 198.51.100.0/24 500ms <nil>
}
