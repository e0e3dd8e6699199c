package fairq

import "sync/atomic"

// RingSize is the number of samples a Ring holds.
const RingSize = 4096

// Ring is a fixed-size lock-free buffer of samples written by many
// goroutines and drained by one. When more than RingSize samples arrive
// between two drains, the oldest are overwritten: the ring keeps a sample of
// the latest ones, which is all the tracker needs. Its zero value is ready
// to use.
type Ring struct {
	pos   atomic.Uint64
	_     [56]byte // keep writers' counter off the slots' cache lines
	slots [RingSize]atomic.Uint64
	read  uint64 // drainer only
}

// Add stores v. It is safe for concurrent use, does not allocate and takes
// no lock.
func (r *Ring) Add(v uint64) {
	i := r.pos.Add(1) - 1
	r.slots[i&(RingSize-1)].Store(v)
}

// Drain calls f with every sample added since the previous Drain (at most
// the latest RingSize) in order and returns how many were added in total,
// lost ones included. Only one goroutine may drain.
func (r *Ring) Drain(f func(v uint64)) (added uint64) {
	end := r.pos.Load()
	added = end - r.read
	start := r.read
	if added > RingSize {
		start = end - RingSize
	}
	for i := start; i < end; i++ {
		f(r.slots[i&(RingSize-1)].Load())
	}
	r.read = end
	return added
}

// Add2 stores a and b in consecutive slots, so that Drain passes them on
// one after the other (a tenant sample and its prefix's, AddrSamples).
func (r *Ring) Add2(a, b uint64) {
	i := r.pos.Add(2) - 2
	r.slots[i&(RingSize-1)].Store(a)
	r.slots[(i+1)&(RingSize-1)].Store(b)
}

// Add3 stores a, b and c in consecutive slots (see Add2).
func (r *Ring) Add3(a, b, c uint64) {
	i := r.pos.Add(3) - 3
	r.slots[i&(RingSize-1)].Store(a)
	r.slots[(i+1)&(RingSize-1)].Store(b)
	r.slots[(i+2)&(RingSize-1)].Store(c)
}
