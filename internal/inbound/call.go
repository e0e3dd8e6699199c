package inbound

import (
	"context"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
)

// Key names one of the request headers Derive reads. Each protocol maps it
// to its own spelling (HTTP: the configured header names; gRPC: the lower
// case metadata keys).
type Key uint8

// The headers Derive reads.
const (
	Criticality    Key = iota // Levee-Criticality
	Tenant                    // Levee-Tenant
	Attempt                   // Levee-Attempt
	TimeoutMs                 // Levee-Timeout-Ms
	GRPCTimeout               // grpc-timeout
	EnvoyTimeoutMs            // X-Envoy-Expected-Rq-Timeout-Ms
	NumKeys                   // the number of keys, for tables indexed by Key
)

// Rules are one server's rules for deriving levee calls from requests of
// type R (leveehttp: *http.Request; leveegrpc: the stream's context and
// metadata). An adapter builds its Rules once; they are read-only
// afterwards and safe for concurrent use. Header and Peer are the
// adapter's; Trust and Tenant are the user's options.
type Rules[R any] struct {
	// Header returns the values of header k of r, nil when absent.
	// Required. It should not allocate.
	Header func(r R, k Key) []string
	// Trust says whether r's caller is trusted: its criticality is then
	// honoured in full and its tenant header believed. nil trusts nobody.
	Trust func(r R) bool
	// Tenant names the tenant of a request whose tenant is not taken from
	// a trusted caller's header, typically from authentication. Its
	// result passes through wire.FormatTenant (long or non-ASCII ids
	// hashed, ids with control characters refused); "" falls back to
	// Peer. nil means none.
	Tenant func(r R) string
	// Untrusted, when set, decides an untrusted caller's criticality and
	// tenant (a route rule's, for example) from the criticality it asked
	// for: asked is the header's value, has false when it sent no valid
	// one. It must never return a criticality above what the rule allows
	// an untrusted caller (config.Class.For is the rule). A tenant it
	// returns passes through wire.FormatTenant; "" keeps the default
	// (Tenant, then Peer). nil caps the asked criticality at CRITICAL.
	Untrusted func(r R, asked levee.Criticality, has bool) (levee.Criticality, string)
	// Peer returns the default tenant of r's caller, its network prefix
	// (see Peers), or "unknown" for a transport without IP addresses.
	// Required.
	Peer func(r R) string
	// Now reads the clock when Derive needs it and was not given it; nil
	// means time.Now.
	Now func() time.Time
}

// Request is what Derive makes of a request.
type Request struct {
	// Call is the request's criticality, tenant and attempt.
	Call levee.Call
	// Deadline is the request's arrival plus the caller's time budget;
	// zero when the caller sent no valid timeout header.
	Deadline time.Time
}

// Shared rejections, never modified.
var (
	// DeadlineNoRetry is the rejection for a request whose deadline
	// cannot be met: its budget is spent, or its caller is gone.
	DeadlineNoRetry = &levee.RejectedError{Reason: levee.Deadline, NoRetry: true}
	// OverloadedNoRetry is "overloaded; no-retry" without a delay.
	OverloadedNoRetry = &levee.RejectedError{Reason: levee.Overloaded, NoRetry: true}
)

// ErrExpired is returned by Derive for a request whose time budget was
// spent before it could be served (a budget ≤ 0, or arrival + budget not
// after now). It is DeadlineNoRetry.
var ErrExpired error = DeadlineNoRetry

// Derive reads the levee call of request r that arrived at arrival (its
// first bytes, when the adapter knows them) and is served at now. Either
// may be zero: now is then read from Rules.Now and arrival is now, and the
// clock is read only when the request carries a time budget.
//
//   - The time budget is the minimum of the valid values of every timeout
//     header (Levee-Timeout-Ms, grpc-timeout,
//     X-Envoy-Expected-Rq-Timeout-Ms), malformed ones ignored, values
//     above 24 h clamped (internal/wire). A budget ≤ 0, or one that ends
//     no later than now, returns ErrExpired, with the call still derived
//     (so that the rejection is counted with its criticality) and no
//     deadline.
//   - The call is Call's.
//
// It does not allocate unless a tenant id must be hashed or Peer misses
// its cache.
func (x *Rules[R]) Derive(r R, arrival, now time.Time) (Request, error) {
	out := Request{Call: x.Call(r)}
	budget, ok := wire.ParseTimeout(x.Header(r, TimeoutMs), x.Header(r, GRPCTimeout), x.Header(r, EnvoyTimeoutMs))
	if !ok {
		return out, nil
	}
	if now.IsZero() {
		now = x.now()
	}
	if arrival.IsZero() {
		arrival = now
	}
	if dl := arrival.Add(budget); budget > 0 && dl.After(now) {
		out.Deadline = dl
		return out, nil
	}
	return out, ErrExpired
}

// Call reads the levee call of request r, without its deadline:
//
//   - the criticality is the header's (the least important of several
//     valid values; CRITICAL when none), capped at CRITICAL for an
//     untrusted caller, who may lower its level but never raise it, or
//     for an untrusted caller what Rules.Untrusted decides;
//   - the tenant is a trusted caller's Levee-Tenant, else (untrusted)
//     Rules.Untrusted's, else Rules.Tenant's result, else the peer's
//     network prefix; every id is bounded and
//     printable (wire.ParseTenant's rule);
//   - the attempt number is a trusted caller's Levee-Attempt (0 when
//     absent or malformed). An untrusted caller's is ignored: the share of
//     retries among all arrivals turns every overload rejection into
//     "no-retry", so one caller claiming retries could switch retrying
//     off for everyone. Its retries still count as what they are, its
//     tenant's arrivals, which tenant fairness weighs like any other load.
func (x *Rules[R]) Call(r R) levee.Call {
	var c levee.Call
	trusted := x.Trust != nil && x.Trust(r)
	asked, has := wire.ParseCriticality(x.Header(r, Criticality))
	c.Criticality = asked
	switch {
	case trusted:
	case x.Untrusted != nil:
		c.Criticality, c.Tenant = x.Untrusted(r, asked, has)
		if !c.Criticality.Valid() {
			c.Criticality = levee.Critical
		}
		if c.Tenant != "" {
			c.Tenant = wire.FormatTenant(c.Tenant)
		}
	case asked.Rank() > levee.Critical.Rank():
		c.Criticality = levee.Critical
	}
	if trusted {
		c.Tenant, _ = wire.ParseTenant(x.Header(r, Tenant))
	}
	if c.Tenant == "" && x.Tenant != nil {
		c.Tenant = wire.FormatTenant(x.Tenant(r))
	}
	if c.Tenant == "" {
		c.Tenant = x.Peer(r)
	}
	if trusted {
		c.Attempt, _ = wire.ParseAttempt(x.Header(r, Attempt))
	}
	return c
}

func (x *Rules[R]) now() time.Time {
	if x.Now != nil {
		return x.Now()
	}
	return time.Now()
}

// Bound returns ctx bounded by dl when dl is set and earlier than ctx's own
// deadline (the server's deadline is the earlier of its own and the
// caller's), with the function releasing the new context's timer; otherwise
// ctx itself and a nil function.
func Bound(ctx context.Context, dl time.Time) (context.Context, context.CancelFunc) {
	if dl.IsZero() {
		return ctx, nil
	}
	if old, ok := ctx.Deadline(); ok && !dl.Before(old) {
		return ctx, nil
	}
	return context.WithDeadline(ctx, dl)
}
