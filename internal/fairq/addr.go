package fairq

import (
	"encoding/binary"
	"net/netip"
)

// Prefix levels above a tenant identified by its address: level 1 is an
// IPv6 /48 (one site) or an IPv4 /16, level 2 an IPv6 /32 (an ISP's
// allocation). The tenant itself is the caller's /64 or /24.
const (
	saltV4L1 = 0x6a09e667f3bcc908
	saltV6L1 = 0xbb67ae8584caa73b
	saltV6L2 = 0x3c6ef372fe94f82b
)

// PrefixKeys returns the keys of addr's prefixes at levels 1 and 2 for
// seed: an IPv6 address's /48 and /32, an IPv4 (or IPv4-mapped)
// address's /16 and 0. An invalid address has none. It does not allocate.
func PrefixKeys(seed uint64, addr netip.Addr) (l1, l2 uint64) {
	if !addr.IsValid() {
		return 0, 0
	}
	addr = addr.Unmap()
	b := addr.As16()
	if addr.Is4() {
		v := uint64(binary.BigEndian.Uint32(b[12:]))
		return Key(Mix(seed ^ saltV4L1 ^ v>>16)), 0
	}
	hi := binary.BigEndian.Uint64(b[:8])
	return Key(Mix(seed ^ saltV6L1 ^ hi>>16)), Key(Mix(seed ^ saltV6L2 ^ hi>>32))
}

// ParentSample returns the ring word of a level-1 or level-2 prefix key
// of a sampled tenant, class as the tenant's. The tenant's own word is
// ParentsSample; the words go into the ring together (Ring.Add2, Add3) so
// that the Tracker reads them in order.
func ParentSample(key uint64, level, class int) uint64 {
	return withTag(key, class, tagLevel1+level-1)
}

// ParentsSample returns the ring word of a tenant whose prefix samples
// follow it.
func ParentsSample(key uint64, class int) uint64 { return withTag(key, class, tagParents) }
