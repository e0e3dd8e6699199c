package fleetredis

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/levee-dev/levee/fleet"
)

//go:embed script.lua
var scriptSrc string

var exchange = redis.NewScript(scriptSrc)

// DefaultPrefix is the key prefix of a Store made with an empty prefix.
const DefaultPrefix = "levee:fleet"

// batch is the number of tenants sent in one script call, so that Redis
// is never blocked for long by one instance.
const batch = 200

// Store is a fleet.Store on Redis. Every key starts with "{prefix}" (a
// hash tag: on a Redis Cluster they all live in one slot, so the script's
// multi-key calls are allowed), and every key expires after twice the
// lease TTL without an exchange. Per tenant it keeps a hash (a field per
// instance, "wants,has,usage" in micro-cores, and the sums) and a sorted
// set of the instances' last exchange times by Redis's clock; one Lua
// script applies a batch of claims atomically. Safe for concurrent use.
type Store struct {
	c      redis.UniversalClient
	prefix string
}

// New returns a Store using c under prefix ("" for DefaultPrefix). Every
// instance of a fleet must use the same prefix; two fleets sharing a Redis
// use two prefixes. A prefix holding '{' or '}' is refused.
func New(c redis.UniversalClient, prefix string) (*Store, error) {
	if c == nil {
		return nil, errors.New("fleetredis: nil client")
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	for _, r := range prefix {
		if r == '{' || r == '}' {
			return nil, fmt.Errorf("fleetredis: prefix %q: braces are not allowed", prefix)
		}
	}
	return &Store{c: c, prefix: "{" + prefix + "}"}, nil
}

func (s *Store) keys(c fleet.Claim) (h, z string) {
	if c.Default {
		return s.prefix + ":h:d", s.prefix + ":z:d"
	}
	return s.prefix + ":h:t:" + c.Tenant, s.prefix + ":z:t:" + c.Tenant
}

// Exchange sends r's claims (in batches of 200 tenants, pipelined) and
// fills r.Grants and r.Live. Scripts missing from Redis (after a restart)
// are loaded again. It fails as a whole: on any error r's grants must not
// be used.
func (s *Store) Exchange(ctx context.Context, r *fleet.Round) error {
	ttl := r.TTL.Milliseconds()
	if ttl <= 0 {
		return fmt.Errorf("fleetredis: TTL %v too short", r.TTL)
	}
	run := func() ([]*redis.Cmd, error) {
		pipe := s.c.Pipeline()
		var cmds []*redis.Cmd
		for lo := 0; lo == 0 || lo < len(r.Claims); lo += batch {
			hi := min(lo+batch, len(r.Claims))
			keys := []string{s.prefix + ":instances"}
			args := []any{r.Instance, ttl}
			for _, c := range r.Claims[lo:hi] {
				h, z := s.keys(c)
				keys = append(keys, h, z)
				rel := 0
				if c.Release {
					rel = 1
				}
				args = append(args, fleet.ToMicro(c.Quota), fleet.ToMicro(c.Wants), fleet.ToMicro(c.Target), fleet.ToMicro(c.Usage), rel)
			}
			cmds = append(cmds, exchange.EvalSha(ctx, pipe, keys, args...))
		}
		_, err := pipe.Exec(ctx)
		return cmds, err
	}
	cmds, err := run()
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err = exchange.Load(ctx, s.c).Err(); err == nil {
			cmds, err = run()
		}
	}
	if err != nil {
		return fmt.Errorf("fleetredis: exchange: %w", err)
	}
	r.Grants = r.Grants[:0]
	for i, cmd := range cmds {
		vals, err := cmd.Int64Slice()
		if err != nil {
			return fmt.Errorf("fleetredis: exchange reply: %w", err)
		}
		want := min(batch, len(r.Claims)-i*batch)
		if len(vals) != 1+5*want {
			return fmt.Errorf("fleetredis: exchange reply of %d values for %d tenants", len(vals), want)
		}
		r.Live = int(vals[0])
		for j := range want {
			v := vals[1+5*j:]
			r.Grants = append(r.Grants, fleet.Grant{
				Has: fleet.FromMicro(v[0]), SumWants: fleet.FromMicro(v[1]), SumHas: fleet.FromMicro(v[2]),
				SumUsage: fleet.FromMicro(v[3]), Instances: int(v[4]),
			})
		}
	}
	return nil
}

// String describes the store, e.g. "redis {levee:fleet} at 127.0.0.1:6379".
func (s *Store) String() string {
	addr := "?"
	if o, ok := s.c.(*redis.Client); ok {
		addr = o.Options().Addr
	}
	return "redis " + s.prefix + " at " + addr
}

var _ fleet.Store = (*Store)(nil)
