package cgroup_test

import (
	"fmt"
	"os"

	"github.com/levee-dev/levee/internal/cgroup"
)

// A Kubernetes container on cgroup v2 limited to 1.5 cores.
func ExampleFindCPU() {
	c, err := cgroup.FindCPU(os.DirFS("testdata/v2-quota"))
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := c.Limit()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c)
	fmt.Println(l.Cores(), "cores")
	// Output:
	// cgroup v2 cpu=sys/fs/cgroup/kubepods.slice/pod1/ctr
	// 1.5 cores
}

// The hybrid layout of a host with v1 controllers and an empty cgroup2: the
// "0::/" line is not taken for cgroup v2.
func ExampleFindCPU_hybrid() {
	c, _ := cgroup.FindCPU(os.DirFS("testdata/hybrid"))
	l, _ := c.Limit()
	fmt.Println(c)
	fmt.Println("quota:", !l.Quota.Unlimited(), "cpuset:", l.CPUs)
	// Output:
	// cgroup v1 cpu=sys/fs/cgroup/cpu cpuacct=sys/fs/cgroup/cpuacct
	// quota: false cpuset: 2
}

// The same container's memory: 1 GiB on the pod, memory.high at 768 MiB on
// the container; the tighter binds.
func ExampleFindMemory() {
	m, err := cgroup.FindMemory(os.DirFS("testdata/v2-quota"))
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := m.Limit()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m)
	fmt.Println(l.Bytes()>>20, "MiB, set by", l.HighDir)
	// Output:
	// cgroup v2 memory=sys/fs/cgroup/kubepods.slice/pod1/ctr
	// 768 MiB, set by sys/fs/cgroup/kubepods.slice/pod1/ctr
}
