package inbound

import (
	"net"
	"net/netip"
	"sync/atomic"

	"github.com/levee-dev/levee/internal/wire"
)

// Unknown is the default tenant of a caller without an IP address (a Unix
// socket, an in-memory transport).
const Unknown = "unknown"

const peerSlots = 256

// Peers caches the default tenants of recent callers: the network prefix of
// their address (wire.AppendPeerTenant: /24 for IPv4, /64 for IPv6), as a
// string that a hit returns without allocating. It is a direct-mapped table
// whose slots a miss replaces, so it holds at most 256 prefixes whatever
// the number of callers. The zero value is ready; it is safe for
// concurrent use and must not be copied after first use.
type Peers struct {
	slots [peerSlots]atomic.Pointer[peerEntry]
}

type peerEntry struct {
	p netip.Prefix
	s string
}

// Tenant returns the default tenant of a caller at addr: its network
// prefix, or Unknown for an invalid addr.
func (c *Peers) Tenant(addr netip.Addr) string {
	if !addr.IsValid() {
		return Unknown
	}
	a := addr.Unmap()
	bits := 64
	if a.Is4() {
		bits = 24
	}
	p, err := a.WithZone("").Prefix(bits)
	if err != nil {
		return Unknown
	}
	b := p.Addr().As16()
	x := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	x ^= uint64(b[12])<<16 | uint64(b[13])<<8 | uint64(b[14])
	slot := &c.slots[(x*0x9e3779b97f4a7c15)>>56]
	if e := slot.Load(); e != nil && e.p == p {
		return e.s
	}
	var buf [64]byte
	e := &peerEntry{p: p, s: string(wire.AppendPeerTenant(buf[:0], a))}
	slot.Store(e)
	return e.s
}

// TenantOf is Tenant for a remote address written as "ip:port" (as in
// http.Request.RemoteAddr) or a bare ip; anything else gives Unknown.
func (c *Peers) TenantOf(hostport string) string { return c.Tenant(Addr(hostport)) }

// TenantOfAddr is Tenant for a net.Addr (see NetAddr).
func (c *Peers) TenantOfAddr(addr net.Addr) string { return c.Tenant(NetAddr(addr)) }

// Addr returns the IP address of a remote address written as "ip:port"
// (as in http.Request.RemoteAddr) or a bare ip, unmapped (an IPv4-mapped
// IPv6 address is its IPv4 address); the zero Addr for anything else. It
// does not allocate.
func Addr(hostport string) netip.Addr {
	if ap, err := netip.ParseAddrPort(hostport); err == nil {
		return ap.Addr().Unmap()
	}
	if a, err := netip.ParseAddr(hostport); err == nil {
		return a.Unmap()
	}
	return netip.Addr{}
}

// NetAddr returns the IP of a TCP, UDP or IP address, else of the
// address's string form as Addr reads it, unmapped; the zero Addr for nil
// or an address without an IP (a Unix socket).
func NetAddr(addr net.Addr) netip.Addr {
	var ip net.IP
	switch a := addr.(type) {
	case nil:
		return netip.Addr{}
	case *net.TCPAddr:
		ip = a.IP
	case *net.UDPAddr:
		ip = a.IP
	case *net.IPAddr:
		ip = a.IP
	default:
		return Addr(addr.String())
	}
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}
