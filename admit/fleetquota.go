package admit

import (
	"time"

	"github.com/levee-dev/levee"
)

// TenantLimiter enforces tenant quotas that Admit cannot decide alone, such
// as a share of a fleet-wide quota held by this process (see the module
// github.com/levee-dev/levee/fleet). Admit calls Allow on the accept path
// for every request that names a tenant, so Allow must be safe for
// concurrent use, must not block, lock or allocate, and must not make a
// network call: whatever it needs from elsewhere it learns in the
// background.
//
// Allow reports whether a request of tenant at criticality c may start at
// now; when it may not, retryAfter says when the tenant may come back
// (≤ 0 is read as "soon").
type TenantLimiter interface {
	Allow(tenant string, c levee.Criticality, now time.Time) (retryAfter time.Duration, ok bool)
}

// WithTenantLimiter makes Admit consult l for every request that names a
// tenant (a request without a tenant never reaches l). A request l refuses
// is rejected with Reason Quota and l's retry-after, and counted as a quota
// rejection. nil removes the limiter (the default: none).
//
// Where WithQuota and a TenantLimiter both apply, a request must pass both,
// in this order: the local WithQuota buckets first (per process, in
// requests), then l (for example the fleet-wide quota, in resource cost).
// A request WithQuota refuses never reaches l, so it uses none of the
// tenant's fleet quota; the stricter of the two therefore wins. Both come
// before overload shedding: a tenant's excess over its quota is rejected as
// Quota, not counted as load.
func WithTenantLimiter(l TenantLimiter) Option {
	return func(c *config) { c.tenants = l }
}

// limitTenant applies the TenantLimiter, if any, to a request of tenant
// (not empty) at now (the controller's monotonic scale, see clock.go; the
// limiter gets it as a time): nil to go on, else the rejection.
func (c *Controller) limitTenant(tenant string, cr levee.Criticality, now int64) *levee.RejectedError {
	l := c.cfg.tenants
	if l == nil {
		return nil
	}
	wait, ok := l.Allow(tenant, cr, c.timeAt(now))
	if ok {
		return nil
	}
	c.rejected[cr][levee.Quota].Add(1)
	return &c.quotaTable[raIndex(wait)]
}
