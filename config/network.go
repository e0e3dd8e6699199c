package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// Network is a client network: a CIDR ("10.0.0.0/8", "2001:db8::/32") or a
// single address ("192.0.2.7", which means 192.0.2.7/32). IPv4-mapped IPv6
// client addresses match IPv4 networks.
type Network struct {
	netip.Prefix
}

// ParseNetwork parses a CIDR or a single address. A CIDR with host bits
// set ("10.0.0.1/8") is refused with the network it probably means.
func ParseNetwork(s string) (Network, error) {
	s = strings.TrimSpace(s)
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return Network{}, fmt.Errorf("%q is not an IP address or a CIDR network such as 10.0.0.0/8", s)
		}
		if a.Zone() != "" {
			return Network{}, fmt.Errorf("%q: zoned addresses are not supported", s)
		}
		a = a.Unmap()
		return Network{netip.PrefixFrom(a, a.BitLen())}, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return Network{}, fmt.Errorf("%q is not a CIDR network such as 10.0.0.0/8", s)
	}
	if m := p.Masked(); m != p {
		return Network{}, fmt.Errorf("%q has host bits set; did you mean %q?", s, m.String())
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		a := p.Addr().Unmap()
		p = netip.PrefixFrom(a, p.Bits()-96)
	}
	return Network{p}, nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseNetwork.
func (n *Network) UnmarshalText(b []byte) error {
	x, err := ParseNetwork(string(b))
	if err != nil {
		return err
	}
	*n = x
	return nil
}

// MarshalText implements encoding.TextMarshaler: the CIDR form.
func (n Network) MarshalText() ([]byte, error) {
	if !n.IsValid() {
		return []byte{}, nil
	}
	return []byte(n.Prefix.String()), nil
}

// String returns the CIDR form.
func (n Network) String() string {
	if !n.IsValid() {
		return ""
	}
	return n.Prefix.String()
}

// Contains reports whether addr is in the network; an IPv4-mapped IPv6
// address counts as its IPv4 address.
func (n Network) Contains(addr netip.Addr) bool {
	return n.IsValid() && n.Prefix.Contains(addr.Unmap().WithZone(""))
}
