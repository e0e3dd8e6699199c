// Package fleetredis is the Redis store of package fleet: the instances
// of a fleet exchange their tenants' usage and leases through one Redis
// (standalone, Sentinel, or a Cluster, where every key lives in one
// slot), with a Lua script that applies a batch of claims atomically and
// reads time from Redis itself, so that the instances' clocks do not
// matter. Keys expire on their own once no instance reports them.
//
//	l, _ := fleet.New(cfg)
//	st, _ := fleetredis.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}), "")
//	go l.Run(ctx, st)
//	ctl := admit.New(admit.WithSignals(...), admit.WithTenantLimiter(l))
//
// The tests start their own redis-server (Debian's redis-server package)
// on loopback ports and skip when it is not installed, unless
// LEVEE_REQUIRE_REDIS is set.
package fleetredis
