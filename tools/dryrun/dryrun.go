package dryrun

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/pressure"
)

// Protection is the name Wrap is registered under in the harness.
const Protection = "levee-dry-run"

// OutEnv names the environment variable holding the file a backend in
// dry-run appends its records to (one JSON Record per line).
const OutEnv = "LEVEE_DRYRUN_OUT"

// RecordEvery is how often Wrap's recorder writes a Record.
const RecordEvery = 250 * time.Millisecond

// Record is the controller's state at one time, as the recorder writes it.
type Record struct {
	Time time.Time `json:"time"`
	// DryRun is the controller's Snapshot.DryRun.
	DryRun bool `json:"dry_run"`
	// Admitted, Rejected and WouldReject are cumulative, indexed by
	// levee.Criticality (and levee.Reason).
	Admitted    [levee.NumCriticalities]uint64                   `json:"admitted"`
	Rejected    [levee.NumCriticalities][levee.NumReasons]uint64 `json:"rejected"`
	WouldReject [levee.NumCriticalities][levee.NumReasons]uint64 `json:"would_reject"`
	// OfferedRPS, CapacityRPS and WouldShedRPS are the controller's
	// estimates; Load its reading.
	OfferedRPS   float64 `json:"offered_rps"`
	CapacityRPS  float64 `json:"capacity_rps"`
	WouldShedRPS float64 `json:"would_shed_rps"`
	Load         float64 `json:"load"`
}

func finite(x float64) float64 {
	if x != x || x > 1e300 || x < -1e300 {
		return 0
	}
	return x
}

func recordOf(now time.Time, s admit.Snapshot) Record {
	return Record{Time: now, DryRun: s.DryRun, Admitted: s.Admitted, Rejected: s.Rejected, WouldReject: s.WouldReject,
		OfferedRPS: finite(s.OfferedRPS), CapacityRPS: finite(s.CapacityRPS), WouldShedRPS: finite(s.WouldShedRPS), Load: finite(s.Load)}
}

// Wrap puts app behind levee in dry-run, for the harness's backend child.
// Its control loops run for the life of the process.
func Wrap(app http.Handler) http.Handler {
	set, err := pressure.Default()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dryrun:", err)
		os.Exit(2)
	}
	ctl := admit.New(admit.WithSignals(set.Signals()...), admit.WithDryRun(true))
	ctx := context.Background()
	go set.Run(ctx)
	go ctl.Run(ctx)
	if out := os.Getenv(OutEnv); out != "" {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Fprintln(os.Stderr, "dryrun:", err)
			os.Exit(2)
		}
		go record(ctx, f, ctl.Snapshot)
	}
	h := leveehttp.NewHandler(app, ctl,
		leveehttp.WithQueueDelay(set.Queue), leveehttp.WithConcurrency(set.Concurrency),
		leveehttp.WithTrust(func(*http.Request) bool { return true }))
	return Mix(h)
}

// record appends a Record to w every RecordEvery until ctx is done.
func record(ctx context.Context, w io.Writer, snap func() admit.Snapshot) {
	t := time.NewTicker(RecordEvery)
	defer t.Stop()
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			_ = enc.Encode(recordOf(now, snap()))
			_ = bw.Flush()
		}
	}
}

// Mix sets each request's Levee-Criticality so that the four levels come
// in equal parts, in turn, on a copy of the request (the caller's is not
// modified). The next handler must trust its caller for CRITICAL_PLUS to
// stay what it is.
func Mix(next http.Handler) http.Handler {
	var n atomic.Uint64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := levee.FromRank(int(n.Add(1) % levee.NumCriticalities))
		r2 := new(http.Request)
		*r2 = *r
		r2.Header = r.Header.Clone()
		r2.Header.Set(leveehttp.HeaderCriticality, c.String())
		next.ServeHTTP(w, r2)
	})
}

// ReadRecords reads the records a recorder wrote.
func ReadRecords(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Record
	dec := json.NewDecoder(f)
	for dec.More() {
		var r Record
		if err := dec.Decode(&r); err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// At returns the last record at or before t (the first record if none).
func At(recs []Record, t time.Time) Record {
	best := Record{}
	for i, r := range recs {
		if i == 0 || !r.Time.After(t) {
			best = r
		}
	}
	return best
}

// Sum totals a per-criticality, per-reason counter array over reasons.
func Sum(a [levee.NumReasons]uint64) uint64 {
	var n uint64
	for _, v := range a {
		n += v
	}
	return n
}
