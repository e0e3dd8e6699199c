package fairq

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Hash returns a 64-bit hash of s that depends only on s and seed (unlike
// hash/maphash, whose seeds are random), so that runs are reproducible. It
// does not allocate. It is not a cryptographic hash: tenants that control
// their ids can collide on purpose with ~2^32 work, which buys them at most
// sharing another tenant's accounting.
func Hash(seed uint64, s string) uint64 {
	const (
		m1 = 0xa0761d6478bd642f
		m2 = 0xe7037ed1a0b428db
	)
	b := unsafe.Slice(unsafe.StringData(s), len(s))
	h := seed ^ m1 ^ uint64(len(s))*m2
	for len(b) >= 8 {
		hi, lo := bits.Mul64(h^binary.LittleEndian.Uint64(b), m2)
		h = hi ^ lo
		b = b[8:]
	}
	if len(b) > 0 {
		var t uint64
		for i, c := range b {
			t |= uint64(c) << (8 * i)
		}
		hi, lo := bits.Mul64(h^t^m1, m2)
		h = hi ^ lo
	}
	return Mix(h)
}

// Mix is the splitmix64 finalizer: a bijection on uint64 with good
// avalanche, used to turn counters into well-spread values.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
