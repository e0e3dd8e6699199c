package cgroup

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestParseCPUMax(t *testing.T) {
	tests := []struct {
		in      string
		want    Quota
		cores   float64
		wantErr bool
	}{
		{in: "150000 100000\n", want: Quota{150 * time.Millisecond, 100 * time.Millisecond}, cores: 1.5},
		{in: "50000 100000", want: Quota{50 * time.Millisecond, 100 * time.Millisecond}, cores: 0.5},
		{in: "max 100000\n", want: Quota{-1, 100 * time.Millisecond}, cores: math.Inf(1)},
		{in: "1000 1000000\n", want: Quota{time.Millisecond, time.Second}, cores: 0.001},
		{in: "", wantErr: true},
		{in: "\n", wantErr: true},
		{in: "max\n", wantErr: true},
		{in: "-50000 100000\n", wantErr: true},
		{in: "+50000 100000\n", wantErr: true},
		{in: "050000 100000\n", wantErr: true},
		{in: "50000  100000\n", wantErr: true},
		{in: " 50000 100000\n", wantErr: true},
		{in: "50000 100000 7\n", wantErr: true},
		{in: "50000 0\n", wantErr: true},
		{in: "500 100000\n", wantErr: true},    // quota below the kernel's 1 ms
		{in: "50000 2000000\n", wantErr: true}, // period above 1 s
		{in: "max 100000\nmax 100000\n", wantErr: true},
		{in: "99999999999999999999 100000\n", wantErr: true},
		{in: "5e4 100000\n", wantErr: true},
		{in: "MAX 100000\n", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseCPUMax([]byte(tt.in))
		if tt.wantErr {
			if err == nil || !errors.Is(err, ErrMalformed) {
				t.Errorf("ParseCPUMax(%q) = %v, %v; want an ErrMalformed error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want || got.Cores() != tt.cores {
			t.Errorf("ParseCPUMax(%q) = %v (%v cores), %v; want %v (%v cores)", tt.in, got, got.Cores(), err, tt.want, tt.cores)
		}
	}
}

func TestParseCFS(t *testing.T) {
	tests := []struct {
		quota, period string
		cores         float64
		wantErr       bool
	}{
		{quota: "200000\n", period: "100000\n", cores: 2},
		{quota: "25000\n", period: "50000\n", cores: 0.5},
		{quota: "-1\n", period: "100000\n", cores: math.Inf(1)},
		{quota: "-2\n", period: "100000\n", wantErr: true},
		{quota: "0\n", period: "100000\n", wantErr: true},
		{quota: "100000\n", period: "-1\n", wantErr: true},
		{quota: "100000\n", period: "\n", wantErr: true},
		{quota: "abc\n", period: "100000\n", wantErr: true},
		{quota: "100000 \n", period: "100000\n", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseCFS([]byte(tt.quota), []byte(tt.period))
		if tt.wantErr {
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("ParseCFS(%q, %q) = %v, %v; want an ErrMalformed error", tt.quota, tt.period, got, err)
			}
			continue
		}
		if err != nil || got.Cores() != tt.cores {
			t.Errorf("ParseCFS(%q, %q) = %v cores, %v; want %v", tt.quota, tt.period, got.Cores(), err, tt.cores)
		}
	}
}

func TestParseUsage(t *testing.T) {
	tests := []struct {
		name    string
		parse   func([]byte) (time.Duration, error)
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"stat", ParseCPUStatUsage, "usage_usec 44389555\nuser_usec 29026285\nsystem_usec 15363269\n", 44389555 * time.Microsecond, false},
		{"stat-last", ParseCPUStatUsage, "user_usec 1\nusage_usec 7", 7 * time.Microsecond, false},
		{"stat-missing", ParseCPUStatUsage, "user_usec 1\n", 0, true},
		{"stat-repeated", ParseCPUStatUsage, "usage_usec 1\nusage_usec 2\n", 0, true},
		{"stat-negative", ParseCPUStatUsage, "usage_usec -1\n", 0, true},
		{"stat-overflow", ParseCPUStatUsage, "usage_usec 9999999999999999999\n", 0, true},
		{"acct", ParseCPUAcctUsage, "46451608401\n", 46451608401, false},
		{"acct-empty", ParseCPUAcctUsage, "", 0, true},
		{"acct-two", ParseCPUAcctUsage, "1\n2\n", 0, true},
	}
	for _, tt := range tests {
		got, err := tt.parse([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("%s: parse(%q) = %v, %v; want %v, error %v", tt.name, tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseCPUSet(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{in: "0-1\n", want: 2},
		{in: "0\n", want: 1},
		{in: "0-3,8,10-11\n", want: 7},
		{in: "0-3,2-5\n", want: 6},
		{in: "\n", wantErr: true},
		{in: "3-1\n", wantErr: true},
		{in: "0-\n", wantErr: true},
		{in: "0,,1\n", wantErr: true},
		{in: "0-99999\n", wantErr: true},
		{in: "a\n", wantErr: true},
	}
	for _, tt := range tests {
		got, err := ParseCPUSet([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseCPUSet(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseProcCgroup(t *testing.T) {
	got, err := ParseProcCgroup([]byte("4:cpu,cpuacct:/docker/abc\n1:name=systemd:/a:b\n0::/\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].ID != 4 || strings.Join(got[0].Controllers, "+") != "cpu+cpuacct" ||
		got[1].Path != "/a:b" || got[2].ID != 0 || got[2].Controllers != nil || got[2].Path != "/" {
		t.Errorf("ParseProcCgroup = %+v", got)
	}
	for _, bad := range []string{"", "x:cpu:/", "1:cpu", "1:cpu:rel", "-1:cpu:/"} {
		if _, err := ParseProcCgroup([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseProcCgroup(%q) error = %v; want ErrMalformed", bad, err)
		}
	}
}

func TestParseMountInfo(t *testing.T) {
	in := "33 31 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:11 - cgroup cgroup rw,cpu,cpuacct\n" +
		"41 31 0:38 / /mnt/with\\040space rw,relatime - cgroup2 cgroup2 rw\n"
	got, err := ParseMountInfo([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Root != "/docker/abc" || got[0].MountPoint != "/sys/fs/cgroup/cpu,cpuacct" ||
		got[0].FSType != "cgroup" || !has(got[0].SuperOptions, "cpuacct") ||
		got[1].MountPoint != "/mnt/with space" || got[1].FSType != "cgroup2" {
		t.Errorf("ParseMountInfo = %+v", got)
	}
	for _, bad := range []string{"", "1 2 3 / /x rw - cgroup", "1 2 3 / /x rw cgroup cgroup rw", "1 2 3 / /x\\04 rw - a b c", "1 2 3 rel /x rw - a b c"} {
		if _, err := ParseMountInfo([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseMountInfo(%q) error = %v; want ErrMalformed", bad, err)
		}
	}
}
