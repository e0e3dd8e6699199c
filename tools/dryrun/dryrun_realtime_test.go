//go:build realtime

package dryrun

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
	"github.com/levee-dev/levee/tools/report"
)

func TestMain(m *testing.M) {
	if loopback.HijackWith(map[string]backend.Wrap{Protection: Wrap}) {
		return
	}
	os.Exit(m.Run())
}

// TestDryRun is issue 18's acceptance for dry-run, on loopback: a backend
// of measured capacity C (closed loop, same run) behind levee in dry-run,
// offered 0.7×C for 4 s then 3×C for 8 s by open-loop clients without
// retries (the four criticalities in equal parts). For each of
// DRYRUN_REPEAT runs (default 3): nothing is rejected (client side and
// server side); the would-be rejections counted during the 3× phase are
// within ±15% of offered − C over it (median of the runs); none is
// CRITICAL_PLUS; the 0.7× phase has next to none (≤ 2% of its offered).
// With DRYRUN_KEEP set to a directory, each run's records (dryrun.Record,
// one every RecordEvery) are kept there as dry-run-<n>.jsonl.
func TestDryRun(t *testing.T) {
	repeat := 3
	if v, err := strconv.Atoi(os.Getenv("DRYRUN_REPEAT")); err == nil && v > 0 {
		repeat = v
	}
	work := time.Millisecond
	ctx := context.Background()
	capRPS, ready, err := loopback.Capacity(ctx, work, 8, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("work %v, backend GOMAXPROCS=%d %s; closed-loop capacity %.0f req/s", work, ready.GOMAXPROCS, ready.Pinned, capRPS)
	phases := []load.Phase{
		{Name: "0.7x", Rate: 0.7 * capRPS, Duration: 4 * time.Second},
		{Name: "3x", Rate: 3 * capRPS, Duration: 8 * time.Second},
	}
	var ratios []float64
	for i := range repeat {
		out := filepath.Join(t.TempDir(), "records.jsonl")
		t.Setenv(OutEnv, out)
		k := watchKernel()
		res, err := loopback.Run(ctx, loopback.Config{
			Name: fmt.Sprintf("dry-run %d", i+1), Protection: Protection, Client: loopback.Naive,
			Work: work, Timeout: time.Second, Retries: 0, Phases: phases, Drain: 3 * time.Second,
		})
		kern := k.stop()
		if err != nil {
			t.Fatal(err)
		}
		if dir := os.Getenv("DRYRUN_KEEP"); dir != "" {
			keep(t, out, filepath.Join(dir, fmt.Sprintf("dry-run-%d.jsonl", i+1)))
		}
		recs, err := ReadRecords(out)
		if err != nil || len(recs) == 0 {
			t.Fatalf("records: %d, %v", len(recs), err)
		}
		if !recs[len(recs)-1].DryRun {
			t.Fatal("the backend's controller was not in dry-run")
		}
		ph := res.Load.Phases
		warmEnd := res.Load.Start.Add(ph[1].Offset)
		overEnd := warmEnd.Add(ph[1].Duration)
		a, b, c := At(recs, res.Load.Start), At(recs, warmEnd), At(recs, overEnd.Add(time.Second)) // arrivals trail the schedule
		last := recs[len(recs)-1]
		var rejected, wouldWarm, wouldOver, wouldPlus uint64
		for cr := range levee.NumCriticalities {
			rejected += Sum(last.Rejected[cr])
			wouldWarm += Sum(b.WouldReject[cr]) - Sum(a.WouldReject[cr])
			wouldOver += Sum(c.WouldReject[cr]) - Sum(b.WouldReject[cr])
		}
		// Shedding never reaches CRITICAL_PLUS here; a request whose
		// deadline cannot be met is refused at every criticality (live
		// levee answers it 504), so that reason is shown apart.
		wouldPlus = last.WouldReject[levee.CriticalPlus][levee.Overloaded]
		plusDeadline := last.WouldReject[levee.CriticalPlus][levee.Deadline]
		excess := float64(ph[1].Offered) - capRPS*ph[1].Duration.Seconds()
		ratio := float64(wouldOver) / excess
		ratios = append(ratios, ratio)
		t.Logf("%s: 3x offered %d, goodput %d, client-side rejected %d (0.7x: %d) | server rejected %d | would reject 0.7x %d, 3x %d (overloaded %d, deadline %d) vs offered − C %.0f: ratio %.2f | CRITICAL_PLUS would reject %d overloaded, %d deadline | controller: capacity %.0f, offered %.0f, would shed %.0f req/s",
			res.Config.Name, ph[1].Offered, ph[1].Goodput, ph[1].Rejected, ph[0].Rejected, rejected,
			wouldWarm, wouldOver, overReason(b, c, levee.Overloaded), overReason(b, c, levee.Deadline), excess, ratio, wouldPlus, plusDeadline,
			c.CapacityRPS, c.OfferedRPS, c.WouldShedRPS)
		t.Logf("%s: kernel: %s", res.Config.Name, kern)
		if ph[0].Rejected+ph[1].Rejected != 0 || rejected != 0 {
			t.Errorf("%s: %d requests rejected by the clients' count, %d by the server's: want none in dry-run", res.Config.Name, ph[0].Rejected+ph[1].Rejected, rejected)
		}
		if wouldPlus != 0 {
			t.Errorf("%s: %d CRITICAL_PLUS requests counted as would-be overload rejections, want none", res.Config.Name, wouldPlus)
		}
		if lim := 0.02 * float64(ph[0].Offered); float64(wouldWarm) > lim {
			t.Errorf("%s: %d would-be rejections at 0.7× capacity, want ≤ %.0f", res.Config.Name, wouldWarm, lim)
		}
	}
	med, lo, hi := report.Median(ratios)
	t.Logf("would reject ÷ (offered − capacity) over the 3× phase: median %.2f, range %.2f–%.2f over %d runs", med, lo, hi, len(ratios))
	if math.Abs(med-1) > 0.15 {
		t.Errorf("median would reject ÷ (offered − capacity) = %.2f, want within ±15%% of 1", med)
	}
}

// keep copies a run's records to path (DRYRUN_KEEP names a directory),
// for reading the controller's estimates period by period.
func keep(t *testing.T, from, path string) {
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Errorf("DRYRUN_KEEP: %v", err)
	}
}

func overReason(b, c Record, r levee.Reason) uint64 {
	var n uint64
	for cr := range levee.NumCriticalities {
		n += c.WouldReject[cr][r] - b.WouldReject[cr][r]
	}
	return n
}

// kernelWatch records, while a run lasts, the longest accept queue of any
// listening socket (every 100 ms) and the namespace's count of connection
// attempts dropped at a full accept queue.
type kernelWatch struct {
	done     chan struct{}
	maxQueue chan int
	before   map[string]uint64
	err      error
}

var kernelCounters = []string{"ListenOverflows", "TCPSynRetrans"}

func watchKernel() *kernelWatch {
	k := &kernelWatch{done: make(chan struct{}), maxQueue: make(chan int, 1)}
	k.before, k.err = readNetstat(kernelCounters...)
	go func() {
		most := 0
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-k.done:
				k.maxQueue <- most
				return
			case <-tick.C:
				if n, ok, err := readAcceptQueue(0); err == nil && ok {
					most = max(most, n)
				}
			}
		}
	}()
	return k
}

// stop ends the watch and says what the kernel saw.
func (k *kernelWatch) stop() string {
	close(k.done)
	most := <-k.maxQueue
	after, err := readNetstat(kernelCounters...)
	if k.err != nil || err != nil {
		return fmt.Sprintf("accept queue up to %d; counters unreadable (%v, %v)", most, k.err, err)
	}
	limit := "?"
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		limit = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("accept queue up to %d (somaxconn %s); connection attempts dropped at a full accept queue %d (ListenOverflows, the whole network namespace), SYN retransmissions %d (TCPSynRetrans: on loopback the clients' own)",
		most, limit, after["ListenOverflows"]-k.before["ListenOverflows"], after["TCPSynRetrans"]-k.before["TCPSynRetrans"])
}
