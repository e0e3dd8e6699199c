package inbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
	"github.com/levee-dev/levee/retry"
)

// req is a protocol-free request for the tests: header values by key, a
// trusted flag, a user tenant and a peer address.
type req struct {
	h       [NumKeys][]string
	trusted bool
	user    string
	peer    string
}

func testRules(peers *Peers, withUser bool) *Rules[*req] {
	x := &Rules[*req]{
		Header: func(r *req, k Key) []string { return r.h[k] },
		Trust:  func(r *req) bool { return r.trusted },
		Peer: func(r *req) (string, netip.Addr) {
			a := Addr(r.peer)
			return peers.Tenant(a), a
		},
	}
	if withUser {
		x.Tenant = func(r *req) string { return r.user }
	}
	return x
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The callers' addresses, set as the call's Peer when the tenant is
// derived from them (and only then).
var (
	p4 = netip.MustParseAddr("192.0.2.7")
	p6 = netip.MustParseAddr("2001:db8:1:2::77")
)

func TestDerive(t *testing.T) {
	long := strings.Repeat("k", 100)
	tests := []struct {
		name     string
		r        req
		user     bool
		arrival  time.Duration // before now
		want     levee.Call
		wantDL   time.Duration // after now; 0: none
		wantErr  error
		wantNote string
	}{
		{name: "nothing", r: req{peer: "192.0.2.7:1"},
			want: levee.Call{Criticality: levee.Critical, Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "untrusted lowers", r: req{peer: "192.0.2.7:1", h: hdr(Criticality, "SHEDDABLE")},
			want: levee.Call{Criticality: levee.Sheddable, Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "untrusted cannot raise", r: req{peer: "192.0.2.7:1", h: hdr(Criticality, "CRITICAL_PLUS")},
			want: levee.Call{Criticality: levee.Critical, Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "untrusted number 4 capped", r: req{peer: "192.0.2.7:1", h: hdr(Criticality, "4")},
			want: levee.Call{Criticality: levee.Critical, Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "trusted raises", r: req{trusted: true, peer: "192.0.2.7:1", h: hdr(Criticality, "CRITICAL_PLUS")},
			want: levee.Call{Criticality: levee.CriticalPlus, Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "untrusted tenant ignored", r: req{peer: "[2001:db8:1:2::77]:9", h: hdr(Tenant, "victim")},
			want: levee.Call{Tenant: "2001:db8:1:2::/64", Peer: p6}},
		{name: "trusted tenant", r: req{trusted: true, peer: "192.0.2.7:1", h: hdr(Tenant, "acme")},
			want: levee.Call{Tenant: "acme"}},
		{name: "trusted long tenant hashed", r: req{trusted: true, peer: "192.0.2.7:1", h: hdr(Tenant, long)},
			want: levee.Call{Tenant: wire.HashTenant(long)}},
		{name: "trusted hostile tenant falls back", r: req{trusted: true, peer: "192.0.2.7:1", h: hdr(Tenant, "a\x01b")},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "user tenant beats untrusted header", user: true, r: req{user: "alice", peer: "192.0.2.7:1", h: hdr(Tenant, "victim")},
			want: levee.Call{Tenant: "alice"}},
		{name: "trusted header beats user tenant", user: true, r: req{trusted: true, user: "alice", peer: "192.0.2.7:1", h: hdr(Tenant, "svc")},
			want: levee.Call{Tenant: "svc"}},
		{name: "user long tenant hashed", user: true, r: req{user: long, peer: "192.0.2.7:1"},
			want: levee.Call{Tenant: wire.HashTenant(long)}},
		{name: "user hostile tenant falls back", user: true, r: req{user: "x\ny", peer: "192.0.2.7:1"},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "user empty falls back", user: true, r: req{peer: "192.0.2.7:1"},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "no ip", r: req{peer: "@/run/sock"},
			want: levee.Call{Tenant: Unknown}},
		{name: "ipv4-mapped peer unmapped", r: req{peer: "[::ffff:192.0.2.7]:1"},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "attempt trusted", r: req{trusted: true, peer: "192.0.2.7:1", h: hdr(Attempt, "2")},
			want: levee.Call{Tenant: "192.0.2.0/24", Attempt: 2, Peer: p4}},
		{name: "attempt untrusted ignored", r: req{peer: "192.0.2.7:1", h: hdr(Attempt, "9")},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "attempt hostile", r: req{trusted: true, peer: "192.0.2.7:1", h: hdr(Attempt, "-4", "NaN")},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "timeout", r: req{peer: "192.0.2.7:1", h: hdr(TimeoutMs, "250")},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}, wantDL: 250 * time.Millisecond},
		{name: "timeout counts from arrival", arrival: 100 * time.Millisecond, r: req{peer: "192.0.2.7:1", h: hdr(TimeoutMs, "250")},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}, wantDL: 150 * time.Millisecond},
		{name: "timeout spent while queued", arrival: 300 * time.Millisecond, r: req{peer: "192.0.2.7:1", h: hdr(TimeoutMs, "250")},
			wantErr: ErrExpired},
		{name: "minimum of every header", r: req{peer: "192.0.2.7:1", h: hdrs(map[Key][]string{
			TimeoutMs: {"900", "x"}, GRPCTimeout: {"300m"}, EnvoyTimeoutMs: {"400"}})},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}, wantDL: 300 * time.Millisecond},
		{name: "envoy alone", r: req{peer: "192.0.2.7:1", h: hdr(EnvoyTimeoutMs, "40")},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}, wantDL: 40 * time.Millisecond},
		{name: "malformed ignored", r: req{peer: "192.0.2.7:1", h: hdrs(map[Key][]string{
			TimeoutMs: {"1.5", "NaN"}, GRPCTimeout: {"-1S", "10"}, EnvoyTimeoutMs: {"１"}})},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}},
		{name: "huge clamped", r: req{peer: "192.0.2.7:1", h: hdr(TimeoutMs, strings.Repeat("9", 40))},
			want: levee.Call{Tenant: "192.0.2.0/24", Peer: p4}, wantDL: wire.MaxTimeout},
		{name: "zero expired", r: req{peer: "192.0.2.7:1", h: hdr(TimeoutMs, "0")}, wantErr: ErrExpired},
		{name: "negative expired", r: req{peer: "192.0.2.7:1", h: hdr(EnvoyTimeoutMs, "500", "-3")}, wantErr: ErrExpired},
		{name: "grpc zero expired", r: req{peer: "192.0.2.7:1", h: hdr(GRPCTimeout, "0n")}, wantErr: ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var peers Peers
			x := testRules(&peers, tt.user)
			got, err := x.Derive(&tt.r, t0.Add(-tt.arrival), t0)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got.Call != tt.want {
				t.Errorf("call = %+v, want %+v", got.Call, tt.want)
			}
			var wantDL time.Time
			if tt.wantDL != 0 {
				wantDL = t0.Add(tt.wantDL)
			}
			if !got.Deadline.Equal(wantDL) {
				t.Errorf("deadline = %v, want %v", got.Deadline, wantDL)
			}
		})
	}
}

func hdr(k Key, v ...string) (h [NumKeys][]string) {
	h[k] = v
	return h
}

func hdrs(m map[Key][]string) (h [NumKeys][]string) {
	for k, v := range m {
		h[k] = v
	}
	return h
}

// TestDeriveExpiredKeepsCall: a spent budget still yields the call, so
// that the rejection is counted with its criticality.
func TestDeriveExpiredKeepsCall(t *testing.T) {
	var peers Peers
	x := testRules(&peers, false)
	r := req{trusted: true, peer: "192.0.2.1:1", h: hdrs(map[Key][]string{TimeoutMs: {"0"}, Criticality: {"CRITICAL_PLUS"}})}
	got, err := x.Derive(&r, t0, t0)
	want := levee.Call{Criticality: levee.CriticalPlus, Tenant: "192.0.2.0/24", Peer: netip.MustParseAddr("192.0.2.1")}
	if err != ErrExpired || got.Call != want || !got.Deadline.IsZero() {
		t.Errorf("Derive = %+v, %v; want %+v without a deadline, ErrExpired", got, err, want)
	}
}

// TestDeriveReadsClockOnlyForBudgets: with no time given, the clock is
// read for a request with a budget, and only then.
func TestDeriveReadsClockOnlyForBudgets(t *testing.T) {
	var peers Peers
	x := testRules(&peers, false)
	reads := 0
	x.Now = func() time.Time { reads++; return t0 }
	r := req{peer: "192.0.2.1:1"}
	if _, err := x.Derive(&r, time.Time{}, time.Time{}); err != nil || reads != 0 {
		t.Errorf("no budget: err %v after %d clock reads, want nil after 0", err, reads)
	}
	r.h[TimeoutMs] = []string{"250"}
	got, err := x.Derive(&r, time.Time{}, time.Time{})
	if err != nil || reads != 1 || !got.Deadline.Equal(t0.Add(250*time.Millisecond)) {
		t.Errorf("budget: deadline %v, err %v after %d clock reads; want now+250ms, nil, 1", got.Deadline, err, reads)
	}
}

func TestDeriveAllocs(t *testing.T) {
	var peers Peers
	x := testRules(&peers, true)
	for _, r := range []req{
		{peer: "192.0.2.7:1"},
		{peer: "[2001:db8::1]:1", h: hdrs(map[Key][]string{Criticality: {"SHEDDABLE"}, TimeoutMs: {"100"}, Attempt: {"1"}})},
		{trusted: true, peer: "192.0.2.7:1", h: hdr(Tenant, "acme")},
		{user: "alice", peer: "192.0.2.7:1"},
	} {
		_, _ = x.Derive(&r, t0, t0) // fills the peer cache
		if n := testing.AllocsPerRun(100, func() { _, _ = x.Derive(&r, t0, t0) }); n != 0 {
			t.Errorf("%+v: %v allocs, want 0", r, n)
		}
	}
}

func TestBound(t *testing.T) {
	base, cancel := context.WithDeadline(context.Background(), t0.Add(time.Hour))
	defer cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		dl     time.Time
		want   time.Time
		change bool
	}{
		{"no caller deadline", base, time.Time{}, t0.Add(time.Hour), false},
		{"caller earlier", base, t0.Add(time.Minute), t0.Add(time.Minute), true},
		{"server earlier", base, t0.Add(2 * time.Hour), t0.Add(time.Hour), false},
		{"server has none", context.Background(), t0.Add(time.Minute), t0.Add(time.Minute), true},
	}
	for _, tt := range tests {
		ctx, release := Bound(tt.ctx, tt.dl)
		got, _ := ctx.Deadline()
		if !got.Equal(tt.want) || (release != nil) != tt.change {
			t.Errorf("%s: deadline %v (new context %v), want %v (%v)", tt.name, got, release != nil, tt.want, tt.change)
		}
		if release != nil {
			release()
		}
	}
}

func TestPeers(t *testing.T) {
	var c Peers
	tests := []struct{ in, want string }{
		{"192.0.2.7:1234", "192.0.2.0/24"},
		{"192.0.2.7", "192.0.2.0/24"},
		{"[::ffff:192.0.2.7]:80", "192.0.2.0/24"},
		{"[2001:db8:1:2:3:4:5:6]:80", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:80", "fe80::/64"},
		{"", Unknown},
		{"bufconn", Unknown},
		{"/var/run/app.sock", Unknown},
	}
	for _, tt := range tests {
		for i := range 2 { // a miss, then a hit
			if got := c.TenantOf(tt.in); got != tt.want {
				t.Errorf("TenantOf(%q) #%d = %q, want %q", tt.in, i, got, tt.want)
			}
		}
	}
	addrs := []struct {
		a    net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 4}, "10.1.2.0/24"},
		{&net.UDPAddr{IP: net.ParseIP("2001:db8::9")}, "2001:db8::/64"},
		{&net.IPAddr{IP: net.IP{1, 2}}, Unknown},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, Unknown},
		{nil, Unknown},
	}
	for _, tt := range addrs {
		if got := c.TenantOfAddr(tt.a); got != tt.want {
			t.Errorf("TenantOfAddr(%v) = %q, want %q", tt.a, got, tt.want)
		}
	}
	if got := c.Tenant(netip.Addr{}); got != Unknown {
		t.Errorf("Tenant(invalid) = %q, want %q", got, Unknown)
	}
	if n := testing.AllocsPerRun(100, func() { c.TenantOf("192.0.2.9:1") }); n != 0 {
		t.Errorf("cache hit: %v allocs, want 0", n)
	}
}

// TestPeersBounded: any number of callers keeps the cache at its size, and
// colliding prefixes still get their own tenant.
func TestPeersBounded(t *testing.T) {
	var c Peers
	for i := range 10_000 {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1})
		want := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24).String()
		if got := c.Tenant(a); got != want {
			t.Fatalf("Tenant(%v) = %q, want %q", a, got, want)
		}
	}
	n := 0
	for i := range c.slots {
		if c.slots[i].Load() != nil {
			n++
		}
	}
	if n > peerSlots {
		t.Errorf("%d entries, want ≤ %d", n, peerSlots)
	}
}

func TestDelay(t *testing.T) {
	tests := []struct {
		d    time.Duration
		u    float64
		want time.Duration
	}{
		{0, 0.5, time.Second},
		{-time.Second, 0, 750 * time.Millisecond},
		{2 * time.Second, 0, 1500 * time.Millisecond},
		{2 * time.Second, 0.999999, 2499999 * time.Microsecond},
		{2 * time.Second, 7, 2500 * time.Millisecond}, // u outside [0, 1) is clamped
	}
	for _, tt := range tests {
		if got := Delay(tt.d, tt.u); got.Round(time.Microsecond) != tt.want {
			t.Errorf("Delay(%v, %v) = %v, want %v", tt.d, tt.u, got, tt.want)
		}
	}
	for _, x := range []uint64{0, 1 << 63, ^uint64(0)} {
		if u := Uniform(func() uint64 { return x }); u < 0 || u >= 1 {
			t.Errorf("Uniform(%#x) = %v, want in [0, 1)", x, u)
		}
	}
}

func TestMidTier(t *testing.T) {
	rej := func(r levee.Reason, d time.Duration, nr bool) *levee.RejectedError {
		return &levee.RejectedError{Reason: r, RetryAfter: d, NoRetry: nr}
	}
	tests := []struct {
		name string
		err  error
		want *levee.RejectedError
	}{
		{"nil", nil, nil},
		{"other", errors.New("boom"), nil},
		{"overloaded", rej(levee.Overloaded, 0, false), rej(levee.Overloaded, 0, true)},
		{"overloaded keeps delay", rej(levee.Overloaded, 3*time.Second, false), rej(levee.Overloaded, 3*time.Second, true)},
		{"throttled", levee.ErrThrottled, rej(levee.Overloaded, 0, true)},
		{"budget", &retry.GiveUpError{Err: rej(levee.Overloaded, 0, false), Attempts: 1, Stop: retry.StopBudget}, rej(levee.Overloaded, 0, true)},
		{"quota passes", rej(levee.Quota, time.Second, false), rej(levee.Quota, time.Second, false)},
		{"deadline", rej(levee.Deadline, 0, false), rej(levee.Deadline, 0, true)},
		{"context deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), rej(levee.Deadline, 0, true)},
		{"context canceled", context.Canceled, rej(levee.Deadline, 0, true)},
	}
	for _, tt := range tests {
		got := MidTier(tt.err)
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("%s: MidTier = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestWire(t *testing.T) {
	tests := []struct {
		in      levee.RejectedError
		reason  levee.Reason
		noRetry bool
	}{
		{levee.RejectedError{Reason: levee.Overloaded}, levee.Overloaded, false},
		{levee.RejectedError{Reason: levee.Quota, NoRetry: true}, levee.Quota, true},
		{levee.RejectedError{Reason: levee.Throttled}, levee.Overloaded, true},
		{levee.RejectedError{Reason: 0}, levee.Overloaded, true},
		{levee.RejectedError{Reason: 99}, levee.Overloaded, true},
	}
	for _, tt := range tests {
		r, nr := Wire(&tt.in)
		if r != tt.reason || nr != tt.noRetry {
			t.Errorf("Wire(%+v) = %v, %v; want %v, %v", tt.in, r, nr, tt.reason, tt.noRetry)
		}
	}
}
