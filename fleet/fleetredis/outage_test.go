package fleetredis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/fleet"
	"github.com/levee-dev/levee/fleet/fleetprom"
)

// syncBuffer is a log sink shared by goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// node is one instance: a Limiter exchanging with Redis, behind an
// admit.Controller, with load of its own.
type node struct {
	l    *fleet.Limiter
	ctl  *admit.Controller
	coll *fleetprom.Collector
	// counted by the load loop
	adm, quotaRej, otherRej, badErr atomic.Int64
	admCost                         atomic.Int64 // ns of T's admitted cost
	maxLat                          atomic.Int64 // ns, longest Admit
}

// waitFor polls cond every 20 ms for at most limit and returns how long
// it took, or fails the test.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func TestRedisOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 10 s")
	}
	srv := startRedis(t)
	cfg := fleet.Config{Tenants: map[string]fleet.Quota{"T": {Cores: 0.3, BurstCoreSeconds: 0.3}, "other": {Cores: 3}}}
	const period = 100 * time.Millisecond
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	split := []int{7, 2, 1} // T's requests per tick on each instance
	nodes := make([]*node, 3)
	for i := range nodes {
		l, err := fleet.New(cfg, fleet.WithInstance(string(rune('a'+i))), fleet.WithPeriod(period),
			fleet.WithCPU(nil), fleet.WithInitialInstances(3),
			fleet.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
		if err != nil {
			t.Fatal(err)
		}
		st, err := New(srv.client(t), "outage")
		if err != nil {
			t.Fatal(err)
		}
		n := &node{l: l, ctl: admit.New(admit.WithTenantLimiter(l)), coll: fleetprom.New(l, 10)}
		nodes[i] = n
		wg.Add(2)
		go func() { defer wg.Done(); l.Run(ctx, st) }()
		go func() { defer wg.Done(); n.load(ctx, split[i]) }()
	}
	leased := func(n *node) bool {
		s := n.l.Snapshot()
		ts, _ := s.Tenant("T")
		return s.StoreOK && !s.Fallback && ts.State == fleet.Leased
	}
	all := func(f func(*node) bool) func() bool {
		return func() bool {
			for _, n := range nodes {
				if !f(n) {
					return false
				}
			}
			return true
		}
	}
	converged := func(n *node) bool { return leased(n) && n.l.Snapshot().LiveInstances == 3 }
	waitFor(t, 10*time.Second, "leases from Redis, three instances live", all(converged))
	time.Sleep(5 * period)

	srv.stop()
	for _, n := range nodes {
		n.maxLat.Store(0)
	}
	fallback := func(n *node) bool { return n.l.Snapshot().Fallback }
	waitFor(t, 5*time.Second, "fallback to the local share", all(fallback))
	for _, n := range nodes {
		n.admCost.Store(0)
	}
	time.Sleep(2 * time.Second) // on local shares
	for i, n := range nodes {
		s := n.l.Snapshot()
		ts, _ := s.Tenant("T")
		if ts.State != fleet.Local || ts.LeaseCores < 0.0999 || ts.LeaseCores > 0.1001 {
			t.Errorf("instance %d with Redis down: T %v at %.4f cores, want local 0.1 (0.3 ÷ 3)", i, ts.State, ts.LeaseCores)
		}
		if v := gauge(t, n.coll, "levee_fleet_fallback"); v != 1 {
			t.Errorf("instance %d: levee_fleet_fallback %v, want 1", i, v)
		}
		if v := gauge(t, n.coll, "levee_fleet_store_up"); v != 0 {
			t.Errorf("instance %d: levee_fleet_store_up %v, want 0", i, v)
		}
		// Enforced at the local share: what T was admitted in the 2 s
		// window is at most its share (0.1 core) plus its burst.
		used := float64(n.admCost.Load()) / 1e9 / 2
		if i < 2 && (used > 0.1*1.5+0.05 || used < 0.05) {
			t.Errorf("instance %d with Redis down: T used %.3f cores, want its local share 0.1", i, used)
		}
	}
	for i, n := range nodes {
		if lat := time.Duration(n.maxLat.Load()); lat > 500*time.Millisecond {
			t.Errorf("instance %d: an Admit took %v while Redis was down, want no wait", i, lat)
		}
		if n.otherRej.Load() != 0 || n.badErr.Load() != 0 {
			t.Errorf("instance %d: other tenant refused %d times, %d unexpected errors; want none",
				i, n.otherRej.Load(), n.badErr.Load())
		}
	}

	restart := time.Now()
	restarted := len(logs.String())
	srv.start()
	waitFor(t, 5*time.Second, "fleet enforcement after Redis restarted", all(leased))
	t.Logf("Redis answered after %v; leases again after %v", srv.ready.Sub(restart).Round(10*time.Millisecond),
		time.Since(restart).Round(10*time.Millisecond))
	time.Sleep(3 * period)
	var sum float64
	for _, n := range nodes {
		// An instance whose exchanges time out for 0.9 TTL holds its
		// local share instead, outside the store's sum.
		if ts, _ := n.l.Snapshot().Tenant("T"); ts.State == fleet.Leased {
			sum += ts.LeaseCores
		}
	}
	if sum > 0.3+1e-6 {
		t.Errorf("leases of T sum to %.4f after the restart, want ≤ 0.3", sum)
	}
	// A busy machine may time an exchange out at any time (logged, and a
	// fallback if it lasts), so each instance's log is checked as a
	// sequence: every failure after a success logged once, the fallback
	// at most once, the way back once; in fallback when Redis restarted,
	// and back after.
	out := logs.String()
	for i := range nodes {
		inst := string(rune('a' + i))
		if st, err := storeStates(out[:restarted], inst); err != nil || st != inFallback {
			t.Errorf("instance %s before the restart: %v, state %d; want in fallback (%d):\n%s", inst, err, st, inFallback, out)
		}
		if st, err := storeStates(out, inst); err != nil || st != storeUp {
			t.Errorf("instance %s: %v, state %d; want the store up (%d) after the restart:\n%s", inst, err, st, storeUp, out)
		}
	}
}

// The store's states as an instance logs them.
const (
	storeUp    = iota
	failing    // "exchange with the store failed"
	inFallback // "store unreachable"
)

// storeStates follows the store's states through the lines instance
// inst logged and returns the last, or an error at the first line that
// does not follow from the state before it: failed → unreachable →
// reachable again, the middle step optional.
func storeStates(log, inst string) (int, error) {
	st := storeUp
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, " instance="+inst+" ") {
			continue
		}
		var ok bool
		switch {
		case strings.Contains(line, "exchange with the store failed"):
			st, ok = failing, st == storeUp
		case strings.Contains(line, "store unreachable"):
			st, ok = inFallback, st == failing
		case strings.Contains(line, "store reachable again"):
			st, ok = storeUp, st != storeUp
		default:
			continue
		}
		if !ok {
			return st, fmt.Errorf("unexpected %q", line)
		}
	}
	return st, nil
}

// load offers, every millisecond, k requests of T and one of "other",
// each costing 0.2 ms, until ctx is done.
func (n *node) load(ctx context.Context, k int) {
	const cost = 200 * time.Microsecond
	call := func(tenant string) {
		c := levee.WithCall(ctx, levee.Call{Tenant: tenant})
		start := time.Now()
		tk, err := n.ctl.Admit(c)
		lat := time.Since(start)
		for {
			old := n.maxLat.Load()
			if int64(lat) <= old || n.maxLat.CompareAndSwap(old, int64(lat)) {
				break
			}
		}
		var re *levee.RejectedError
		switch {
		case err != nil && ctx.Err() != nil:
			// the test is over: the caller is gone
		case err == nil:
			n.l.Charge(tenant, "r", cost)
			if tenant == "T" {
				n.adm.Add(1)
				n.admCost.Add(int64(cost))
			}
			tk.Done(nil)
		case errors.As(err, &re) && re.Reason == levee.Quota && tenant == "T":
			n.quotaRej.Add(1)
		case tenant == "other":
			n.otherRej.Add(1)
		default:
			n.badErr.Add(1)
		}
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range k {
			call("T")
		}
		call("other")
	}
}

func gauge(t *testing.T, c *fleetprom.Collector, name string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}
