// Package inbound is the server side of levee's trust boundary, shared by
// leveehttp and leveegrpc so that both protocols derive the same call from
// the same request and answer it the same way. It sits among the leaves:
// it imports levee and internal/wire, and the adapters import it.
//
// For every request an adapter hands Derive its view of the request (a
// Rules value built once: how to read a header, who is trusted, the
// user's tenant function, the peer's address) and gets back
//
//   - the criticality: an untrusted caller may lower its level, never
//     raise it above CRITICAL;
//   - the tenant: a trusted caller's Levee-Tenant, else the user's tenant
//     function, else the peer's network prefix (/24 for IPv4, /64 for
//     IPv6; Peers caches it), every id passed through one rule
//     (wire.FormatTenant: short printable ids as they are, long or
//     non-ASCII ones hashed, control characters refused);
//   - the attempt number;
//   - the deadline set by the caller's time budget: the minimum of every
//     valid Levee-Timeout-Ms, grpc-timeout and
//     X-Envoy-Expected-Rq-Timeout-Ms value, counted from the request's
//     arrival, malformed values ignored, ≤ 0 expired (ErrExpired), above
//     24 h clamped.
//
// The answers share one rule too: Delay jitters the retry advice of a
// rejection (DefaultRetryAfter when the controller gave none) by ±25% so
// that callers rejected together do not come back together, and MidTier
// maps a downstream rejection to what this server tells its own caller.
//
// Nothing here allocates on the accept path except a peer-prefix cache
// miss and the hash of a tenant id that must be hashed.
package inbound
