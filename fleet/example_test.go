package fleet_test

import (
	"context"
	"fmt"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/fleet"
)

// Two instances share tenant "acme"'s quota of 0.3 cores; acme sends
// three times as much to the first as to the second, 0.6 cores in all.
// A real server calls Allow through admit.WithTenantLimiter, meters its
// handlers with Limiter.Handler and runs Limiter.Run with a Redis store;
// here the same code runs on virtual time with the in-memory store.
func Example() {
	cfg := fleet.Config{Tenants: map[string]fleet.Quota{"acme": {Cores: 0.3}}}
	now := time.Unix(0, 0)
	store := fleet.NewMemStore(func() time.Time { return now })
	var ls []*fleet.Limiter
	for _, id := range []string{"a", "b"} {
		l, err := fleet.New(cfg, fleet.WithInstance(id), fleet.WithCPU(nil), fleet.WithInitialInstances(2))
		if err != nil {
			panic(err)
		}
		ls = append(ls, l)
	}
	const cost = 2 * time.Millisecond // each request costs 2 ms of CPU
	used := make([]time.Duration, 2)
	for ms := range 60_000 {
		now = now.Add(time.Millisecond)
		// 0.45 cores to a (9 requests every 40 ms), 0.15 to b (3).
		for i, n := range []int{9, 3} {
			if ms%40 != 0 {
				continue
			}
			for range n {
				if _, ok := ls[i].Allow("acme", levee.Critical, now); ok {
					ls[i].Charge("acme", "/search", cost)
					if ms >= 30_000 {
						used[i] += cost
					}
				}
			}
		}
		if ms%1000 == 0 { // a round a second
			for _, l := range ls {
				r := l.BeginRound(now)
				l.FinishRound(now, r, store.Exchange(context.Background(), r))
			}
		}
	}
	for i, l := range ls {
		ts, _ := l.Snapshot().Tenant("acme")
		fmt.Printf("%s: lease %.3f cores, used %.3f cores\n", l.Instance(), ts.LeaseCores, used[i].Seconds()/30)
	}
	fmt.Printf("fleet: %.2f cores of 0.3\n", (used[0]+used[1]).Seconds()/30)
	// Output:
	// a: lease 0.225 cores, used 0.225 cores
	// b: lease 0.075 cores, used 0.075 cores
	// fleet: 0.30 cores of 0.3
}
