package dryrun

import (
	"strings"
	"testing"
)

const netstatText = `TcpExt: SyncookiesSent SyncookiesRecv ListenOverflows ListenDrops TCPSynRetrans
TcpExt: 0 0 29312 29312 15599
IpExt: InNoRoutes InTruncatedPkts
IpExt: 0 0
`

const tcpText = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:9C41 00000000:0000 0A 00000000:00001001 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:9C41 0100007F:D000 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 20 4 30 10 -1
`

func TestNetstat(t *testing.T) {
	got, err := Netstat(strings.NewReader(netstatText), "ListenOverflows", "TCPSynRetrans")
	if err != nil {
		t.Fatal(err)
	}
	if got["ListenOverflows"] != 29312 || got["TCPSynRetrans"] != 15599 {
		t.Errorf("got %v", got)
	}
	for _, bad := range []string{"", "IpExt: a\nIpExt: 1\n", "TcpExt: A B\nTcpExt: 1\n", "TcpExt: A\nTcpExt: x\n"} {
		if _, err := Netstat(strings.NewReader(bad), "A"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := Netstat(strings.NewReader(netstatText), "Nope"); err == nil {
		t.Error("a missing counter: no error")
	}
}

func TestAcceptQueue(t *testing.T) {
	for _, tc := range []struct {
		port uint16
		n    int
		ok   bool
	}{{0x9C41, 4097, true}, {0x1F90, 0, true}, {0xD000, 0, false}, {0, 4097, true}} {
		n, ok, err := AcceptQueue(strings.NewReader(tcpText), tc.port)
		if err != nil || n != tc.n || ok != tc.ok {
			t.Errorf("port %d: %d %v %v, want %d %v", tc.port, n, ok, err, tc.n, tc.ok)
		}
	}
	if _, _, err := AcceptQueue(strings.NewReader("h\n 0: 0100007F:9C41 0 0A zz\n"), 0x9C41); err == nil {
		t.Error("malformed queues: no error")
	}
}

func FuzzProcParsers(f *testing.F) {
	f.Add(netstatText, uint16(0x9C41))
	f.Add(tcpText, uint16(0x1F90))
	f.Add("TcpExt: A\nTcpExt: 18446744073709551616\n", uint16(0))
	f.Fuzz(func(t *testing.T, text string, port uint16) {
		if m, err := Netstat(strings.NewReader(text), "ListenOverflows"); err == nil && m == nil {
			t.Error("nil map without an error")
		}
		if n, ok, err := AcceptQueue(strings.NewReader(text), port); (err != nil || !ok) && n != 0 {
			t.Errorf("%d without a queue", n)
		}
	})
}
