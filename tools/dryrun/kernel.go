package dryrun

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// What the kernel saw of the demand a saturated server never read: the
// length of a listener's accept queue and the connection attempts dropped
// because it was full. The check logs them beside the controller's own
// count (see the package documentation).

// Netstat reads the named counters of the TcpExt section of a
// /proc/net/netstat text (two lines per section: the field names, then
// the values). A name that is not there is an error.
func Netstat(r io.Reader, names ...string) (map[string]uint64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var head []string
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "TcpExt:" {
			head = nil
			continue
		}
		if head == nil {
			head = f
			continue
		}
		if len(f) != len(head) {
			return nil, fmt.Errorf("netstat: TcpExt has %d names and %d values", len(head), len(f))
		}
		out := make(map[string]uint64, len(names))
		for _, name := range names {
			i := indexOf(head, name)
			if i < 1 {
				return nil, fmt.Errorf("netstat: no TcpExt counter %q", name)
			}
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("netstat: TcpExt %s: %v", name, err)
			}
			out[name] = v
		}
		return out, sc.Err()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("netstat: no TcpExt section")
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// AcceptQueue returns the accept queue's length of the listening socket
// on port in a /proc/net/tcp text (the rx_queue of a socket in state 0A,
// LISTEN), or with port 0 the longest of any listening socket's, and
// whether there is one. The kernel lists listening sockets first, so
// reading stops at the first socket in another state.
func AcceptQueue(r io.Reader, port uint16) (n int, ok bool, err error) {
	sc := bufio.NewScanner(r)
	want := fmt.Sprintf(":%04X", port)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			return 0, false, fmt.Errorf("tcp: short line %q", sc.Text())
		}
		if f[3] != "0A" {
			break
		}
		if port != 0 && !strings.HasSuffix(f[1], want) {
			continue
		}
		_, rx, found := strings.Cut(f[4], ":")
		if !found {
			return 0, false, fmt.Errorf("tcp: queues %q", f[4])
		}
		q, err := strconv.ParseUint(rx, 16, 32)
		if err != nil {
			return 0, false, fmt.Errorf("tcp: rx_queue %q: %v", rx, err)
		}
		n, ok = max(n, int(q)), true
		if port != 0 {
			break
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, err
	}
	return n, ok, nil
}

// readNetstat reads Netstat from /proc/net/netstat.
func readNetstat(names ...string) (map[string]uint64, error) {
	f, err := os.Open("/proc/net/netstat")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Netstat(f, names...)
}

// readAcceptQueue reads AcceptQueue from /proc/net/tcp.
func readAcceptQueue(port uint16) (int, bool, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	return AcceptQueue(f, port)
}
