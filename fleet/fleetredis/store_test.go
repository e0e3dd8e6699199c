package fleetredis

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/levee-dev/levee/fleet"
)

func exchangeOne(t *testing.T, s fleet.Store, id string, ttl time.Duration, cs ...fleet.Claim) *fleet.Round {
	t.Helper()
	r := &fleet.Round{Instance: id, TTL: ttl, Claims: cs}
	if err := s.Exchange(context.Background(), r); err != nil {
		t.Fatalf("%s: %v", id, err)
	}
	return r
}

func TestExchangeMatchesMemStore(t *testing.T) {
	srv := startRedis(t)
	rs, err := New(srv.client(t), "test")
	if err != nil {
		t.Fatal(err)
	}
	ms := fleet.NewMemStore(nil)
	rng := rand.New(rand.NewPCG(3, 4))
	tenants := []fleet.Claim{{Tenant: "a", Quota: 0.3}, {Tenant: "b:c{x}", Quota: 2}, {Default: true, Quota: 1}, {Tenant: "d", Quota: 1e-6}}
	for i := range 400 {
		id := string(rune('p' + rng.IntN(5)))
		var cs []fleet.Claim
		for _, c := range tenants {
			if rng.IntN(3) == 0 {
				continue
			}
			c.Wants, c.Target, c.Usage = rng.Float64()*c.Quota*2, rng.Float64()*c.Quota, rng.Float64()*c.Quota
			c.Release = rng.IntN(10) == 0
			cs = append(cs, c)
		}
		got := exchangeOne(t, rs, id, time.Hour, cs...)
		want := exchangeOne(t, ms, id, time.Hour, cs...)
		if got.Live != want.Live || len(got.Grants) != len(want.Grants) {
			t.Fatalf("exchange %d: live %d, %d grants; memory store: live %d, %d grants", i, got.Live, len(got.Grants), want.Live, len(want.Grants))
		}
		for j := range got.Grants {
			if got.Grants[j] != want.Grants[j] {
				t.Fatalf("exchange %d, claim %+v:\nredis  %+v\nmemory %+v", i, cs[j], got.Grants[j], want.Grants[j])
			}
		}
	}
}

func TestSilentInstanceReclaimed(t *testing.T) {
	srv := startRedis(t)
	rs, err := New(srv.client(t), "")
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	c := fleet.Claim{Tenant: "t", Quota: 1, Wants: 1, Target: 0.8}
	if g := exchangeOne(t, rs, "a", ttl, c).Grants[0]; g.Has != 0.8 {
		t.Fatalf("a: has %v, want 0.8", g.Has)
	}
	if g := exchangeOne(t, rs, "b", ttl, c).Grants[0]; math.Abs(g.Has-0.2) > 1e-9 || g.Instances != 2 {
		t.Fatalf("b while a holds 0.8: has %v of %d instances, want 0.2 of 2", g.Has, g.Instances)
	}
	time.Sleep(ttl + 100*time.Millisecond) // a falls silent
	r := exchangeOne(t, rs, "b", ttl, c)
	if g := r.Grants[0]; g.Has != 0.8 || g.Instances != 1 || g.SumHas != 0.8 || r.Live != 1 {
		t.Errorf("b after a's TTL: has %v, sum %v, %d instances, %d live; want 0.8, 0.8, 1, 1", g.Has, g.SumHas, g.Instances, r.Live)
	}
	time.Sleep(2*ttl + 100*time.Millisecond) // everyone silent: the keys expire
	n, err := srv.client(t).Keys(context.Background(), "*").Result()
	if err != nil || len(n) != 0 {
		t.Errorf("keys left after 2 TTL of silence: %q (%v), want none", n, err)
	}
}

func TestRestartedRedisLoadsTheScriptAgain(t *testing.T) {
	srv := startRedis(t)
	rs, err := New(srv.client(t), "")
	if err != nil {
		t.Fatal(err)
	}
	c := fleet.Claim{Tenant: "t", Quota: 1, Wants: 0.5, Target: 0.5}
	exchangeOne(t, rs, "a", time.Second, c)
	srv.stop()
	r := &fleet.Round{Instance: "a", TTL: time.Second, Claims: []fleet.Claim{c}}
	if err := rs.Exchange(context.Background(), r); err == nil {
		t.Fatalf("exchange with Redis down succeeded")
	}
	srv.start()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := rs.Exchange(context.Background(), r)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exchange 5 s after Redis came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if g := r.Grants[0]; g.Has != 0.5 || g.Instances != 1 {
		t.Errorf("after the restart: %+v, want has 0.5 of 1 instance", g)
	}
}

func TestSumsRebuiltAfterEviction(t *testing.T) {
	srv := startRedis(t)
	cl := srv.client(t)
	rs, err := New(cl, "")
	if err != nil {
		t.Fatal(err)
	}
	c := fleet.Claim{Tenant: "t", Quota: 1, Wants: 0.4, Target: 0.4}
	exchangeOne(t, rs, "a", time.Minute, c)
	exchangeOne(t, rs, "b", time.Minute, c)
	// The sorted set is lost (say, evicted): a's entry has no partner.
	if err := cl.Del(context.Background(), "{levee:fleet}:z:t:t").Err(); err != nil {
		t.Fatal(err)
	}
	g := exchangeOne(t, rs, "b", time.Minute, c).Grants[0]
	if g.SumHas != 0.4 || g.Instances != 1 || g.SumWants != 0.4 {
		t.Errorf("after the loss: %+v; want b's entry alone (0.4 of 1 instance)", g)
	}
}

func TestNewRefusesBadPrefix(t *testing.T) {
	if _, err := New(nil, ""); err == nil {
		t.Error("New(nil client) succeeded")
	}
}
