package leveehttp

import (
	"math"
	"net"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/pressure"
)

// TestBacklogCountsAcceptQueue: connections that have sent their request
// but wait in the accept queue count in Backlog.Unread while their
// listener is watched, and leave it when accepted or unwatched.
func TestBacklogCountsAcceptQueue(t *testing.T) {
	if !kernelViewed {
		t.Skip("the accept queue is read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	b := NewBacklog(pressure.NewSchedLatency())
	unwatch := b.Watch(ln)

	const n = 20
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
	}
	queued := waitQueue(t, ln, n)
	if queued != n {
		t.Fatalf("accept queue %d after %d connections, want %d", queued, n, n)
	}
	if u := b.Unread(); u < n {
		t.Errorf("Unread = %v with %d connections waiting to be accepted, want ≥ %d", u, n, n)
	}

	// Accepted, they leave the accept queue (and, unread, wait in no
	// goroutine here).
	for range n {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	if q, _ := acceptQueue(ln); q != 0 {
		t.Errorf("accept queue %d after accepting every connection, want 0", q)
	}
	if u := b.Unread(); u >= n/2 {
		t.Errorf("Unread = %v with the accept queue empty, want the few goroutines waiting for a processor", u)
	}

	// Unwatched, a queue no longer counts.
	unwatch()
	for range n {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	waitQueue(t, ln, n)
	if u := b.Unread(); u >= n/2 {
		t.Errorf("Unread = %v after unwatching a listener with %d waiting, want them not counted", u, n)
	}
}

// waitQueue waits up to 2 s for ln's accept queue to hold want
// connections (the kernel completes loopback handshakes at once, but not
// synchronously with Dial's return on every system) and returns what it
// holds.
func waitQueue(t *testing.T, ln net.Listener, want int) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		q, ok := acceptQueue(ln)
		if !ok {
			t.Fatal("acceptQueue: the listening socket's TCP_INFO cannot be read")
		}
		if q >= want || time.Now().After(deadline) {
			return q
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBacklogWithoutListeners: with no listener watched, Unread is the
// scheduler latency's own; a listener that is not TCP adds nothing.
func TestBacklogWithoutListeners(t *testing.T) {
	b := NewBacklog(pressure.NewSchedLatency())
	if u := b.Unread(); math.IsNaN(u) || u < 0 {
		t.Errorf("Unread = %v, want the goroutines waiting for a processor", u)
	}
	ln, err := net.Listen("unix", t.TempDir()+"/s")
	if err != nil {
		t.Skip("no unix sockets:", err)
	}
	defer ln.Close()
	if _, ok := acceptQueue(ln); ok {
		t.Error("acceptQueue read a unix listener's queue as TCP's")
	}
	defer b.Watch(ln)()
	if u := b.Unread(); math.IsNaN(u) || u < 0 {
		t.Errorf("Unread = %v watching a unix listener, want the run queue's count", u)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewBacklog(nil) did not panic")
		}
	}()
	NewBacklog(nil)
}

// TestBacklogReplace: the wrapped SchedLatency is replaced in a copy of
// the signals, the others kept in order, the caller's slice untouched.
func TestBacklogReplace(t *testing.T) {
	set, err := pressure.Default()
	if err != nil {
		t.Fatal(err)
	}
	b := NewBacklog(set.Sched)
	sigs := set.Signals()
	got := b.Replace(sigs)
	if len(got) != len(sigs) {
		t.Fatalf("%d signals after Replace, want %d", len(got), len(sigs))
	}
	replaced := 0
	for i, s := range got {
		switch {
		case sigs[i] == levee.Signal(set.Sched):
			if s != levee.Signal(b) {
				t.Errorf("signal %d: %s kept, want the Backlog", i, s.Name())
			}
			replaced++
		case s != sigs[i]:
			t.Errorf("signal %d: %s replaced by %s, want it kept", i, sigs[i].Name(), s.Name())
		}
	}
	if replaced != 1 {
		t.Errorf("%d signals replaced, want the scheduler latency once", replaced)
	}
	for _, s := range sigs {
		if s == levee.Signal(b) {
			t.Error("Replace changed the caller's slice")
		}
	}
}
