// Package cgroup finds and reads the Linux cgroup files that say how much
// CPU this process may use: the bandwidth quota (cgroup v2 cpu.max, v1
// cpu.cfs_quota_us and cpu.cfs_period_us), the cpuset, and the usage
// counters (v2 cpu.stat, v1 cpuacct.usage).
//
// Everything is read through an fs.FS rooted at "/" so that tests run on
// fixture trees (testdata/) copied from real layouts: cgroup v2 with and
// without a quota, a quota on the parent, a cgroup namespace, cgroup v1 with
// and without a quota, a quota below one core, and the hybrid layout
// (v1 cpu/cpuacct controllers plus an empty cgroup2 at
// /sys/fs/cgroup/unified) where the "0::/" line does not mean v2.
//
// The parsers accept exactly what the kernel writes and wrap ErrMalformed
// for anything else: a wrong quota is worse than none, because callers fall
// back to GOMAXPROCS when there is no quota.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), cgroup is a
// leaf: it imports the standard library only, and package pressure is its
// user.
package cgroup
