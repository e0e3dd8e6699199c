package levee

import (
	"context"
	"net/netip"
)

// Call is what levee carries about a request from hop to hop: how important
// it is, on whose behalf it is made and which attempt it is. The zero value
// is a first attempt of Critical importance with no tenant.
type Call struct {
	// Criticality of the request; Critical when unset.
	Criticality Criticality
	// Tenant on whose behalf the request is made; "" when unknown.
	// Servers derive it from authentication or the peer address unless the
	// caller is trusted (see leveehttp).
	Tenant string
	// Attempt is 0 for a first attempt, 1 and 2 for retries.
	Attempt int
	// Peer is the caller's network address when Tenant was derived from it
	// (an untrusted caller's address prefix, see leveehttp), and the zero
	// Addr otherwise. Admission control reads it to group the tenants of
	// one network (the IPv6 /64s of one /48) without parsing Tenant; it is
	// never sent to the next hop.
	Peer netip.Addr
}

type callKey struct{}

// callCtx carries a Call in the same allocation as the context node.
type callCtx struct {
	context.Context
	call Call
}

func (c *callCtx) Value(key any) any {
	if _, ok := key.(callKey); ok {
		return &c.call
	}
	return c.Context.Value(key)
}

func (c *callCtx) String() string { return "levee.WithCall" }

// WithCall returns a copy of ctx carrying c. It allocates once (the context
// node holds the Call); adapters use it to set everything in one step.
func WithCall(ctx context.Context, c Call) context.Context {
	return &callCtx{Context: ctx, call: c}
}

// CallFrom returns the Call carried by ctx, or the zero Call. It does not
// allocate.
func CallFrom(ctx context.Context) Call {
	if c, ok := ctx.Value(callKey{}).(*Call); ok {
		return *c
	}
	return Call{}
}

// WithCriticality returns a copy of ctx whose Call has criticality c and
// keeps the rest of the Call it already carried. An invalid c is stored as
// Critical.
func WithCriticality(ctx context.Context, c Criticality) context.Context {
	if !c.Valid() {
		c = Critical
	}
	call := CallFrom(ctx)
	call.Criticality = c
	return WithCall(ctx, call)
}

// CriticalityFrom returns the criticality carried by ctx, Critical if none.
func CriticalityFrom(ctx context.Context) Criticality { return CallFrom(ctx).Criticality }

// WithTenant returns a copy of ctx whose Call has tenant t and keeps the rest.
func WithTenant(ctx context.Context, t string) context.Context {
	call := CallFrom(ctx)
	call.Tenant = t
	return WithCall(ctx, call)
}

// TenantFrom returns the tenant carried by ctx, "" if none.
func TenantFrom(ctx context.Context) string { return CallFrom(ctx).Tenant }

// WithAttempt returns a copy of ctx whose Call has attempt n (negative n is
// stored as 0) and keeps the rest.
func WithAttempt(ctx context.Context, n int) context.Context {
	if n < 0 {
		n = 0
	}
	call := CallFrom(ctx)
	call.Attempt = n
	return WithCall(ctx, call)
}

// AttemptFrom returns the attempt number carried by ctx, 0 if none.
func AttemptFrom(ctx context.Context) int { return CallFrom(ctx).Attempt }
