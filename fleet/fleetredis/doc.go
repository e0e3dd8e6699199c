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
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), fleetredis is an adapter in the fleet
// module (github.com/levee-dev/levee/fleet): it implements fleet.Store,
// imports fleet and github.com/redis/go-redis/v9, its one dependency outside
// levee, and no package of levee imports it; a service hands its store to
// Limiter.Run.
package fleetredis
