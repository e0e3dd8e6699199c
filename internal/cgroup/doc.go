// Package cgroup finds and reads the Linux cgroup files that say how much
// CPU and memory this process may use: the CPU bandwidth quota (cgroup v2
// cpu.max, v1 cpu.cfs_quota_us and cpu.cfs_period_us), the cpuset, the CPU
// usage counters (v2 cpu.stat, v1 cpuacct.usage) and the memory limits
// (v2 memory.max and memory.high, v1 memory.limit_in_bytes), each the
// tightest on the way from the process's cgroup up to the mount point.
//
// Everything is read through an fs.FS rooted at "/" so that tests run on
// fixture trees (testdata/) copied from real layouts: cgroup v2 with and
// without a quota, a quota on the parent, a cgroup namespace, cgroup v1 with
// and without a quota, a quota below one core, and the hybrid layout
// (v1 cpu/cpuacct controllers plus an empty cgroup2 at
// /sys/fs/cgroup/unified) where the "0::/" line does not mean v2.
//
// The parsers accept exactly what the kernel writes and wrap ErrMalformed
// for anything else: a wrong quota or limit is worse than none, because
// callers fall back (to GOMAXPROCS, to GOMEMLIMIT) when there is none.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), cgroup is a
// leaf: it imports the standard library only, and package pressure is its
// user.
package cgroup
