// Package fairq does levee's tenant accounting in bounded memory, whatever
// the number of distinct tenants.
//
// The accept path only hashes the tenant (Hash) and, for a sampled request,
// stores the hash and the criticality into a lock-free Ring: one atomic add
// and one atomic store. The control loop drains the ring once per period
// into a Tracker, which keeps
//
//   - a Space-Saving heavy-hitter table of at most K tenants with decayed
//     counts and smoothed per-criticality rates (the tenants that can be far
//     above their fair share are always among them: Space-Saving finds every
//     tenant whose share of the stream exceeds 1/K), and
//   - a HyperLogLog count of the tenants active over the last 5–10 s (two
//     rotating generations) from which the fair share is derived, and
//   - for tenants identified by their address (an untrusted caller's /64
//     or /24), Space-Saving tables of their prefixes (IPv6 /48 and /32,
//     IPv4 /16; PrefixKeys), each entry with a small HyperLogLog of the
//     tenants under it: the hierarchical heavy hitters from which admit
//     decides which prefixes count as one tenant. A tenant's prefix
//     samples follow its own in the ring (Ring.Add2, Add3).
//
// Memory is fixed at construction: a Ring of 4096 slots, K table entries,
// 2×64 prefix entries with 256 B of HyperLogLog each and two 4096-register
// HyperLogLogs, well under 1 MiB. Nothing here iterates a map to decide
// anything, so results are deterministic for a seed.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), fairq is a
// leaf: it imports the standard library and internal/smooth only, and package
// admit is its user.
package fairq
