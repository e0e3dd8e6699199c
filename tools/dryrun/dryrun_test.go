package dryrun

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

func TestMix(t *testing.T) {
	count := map[string]int{}
	h := Mix(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		count[r.Header.Get("Levee-Criticality")]++
	}))
	for range 400 {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Levee-Criticality", "SHEDDABLE")
		h.ServeHTTP(httptest.NewRecorder(), r)
		if got := r.Header.Get("Levee-Criticality"); got != "SHEDDABLE" {
			t.Fatalf("Mix modified the caller's request: %q", got)
		}
	}
	for _, c := range levee.Criticalities() {
		if count[c.String()] != 100 {
			t.Errorf("%s: %d of 400 requests, want 100", c, count[c.String()])
		}
	}
}

func TestRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		var n uint64
		snap := func() admit.Snapshot {
			n++
			var s admit.Snapshot
			s.WouldReject[levee.Sheddable][levee.Overloaded] = 10 * n
			s.Admitted[levee.Critical] = n
			s.OfferedRPS = 300
			s.DryRun = true
			return s
		}
		ctx, cancel := context.WithCancel(t.Context())
		go record(ctx, &buf, snap)
		time.Sleep(4*RecordEvery + RecordEvery/2)
		synctest.Wait()
		cancel()
		path := filepath.Join(t.TempDir(), "out")
		if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		recs, err := ReadRecords(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 4 {
			t.Fatalf("%d records over 4.5 periods, want 4", len(recs))
		}
		last := recs[3]
		if !last.DryRun || last.WouldReject[levee.Sheddable][levee.Overloaded] != 40 || last.OfferedRPS != 300 || Sum(last.WouldReject[levee.Sheddable]) != 40 {
			t.Errorf("last record = %+v", last)
		}
		if got := At(recs, recs[1].Time.Add(time.Millisecond)); got.Admitted[levee.Critical] != 2 {
			t.Errorf("At just after the second record = %+v, want the second", got)
		}
		if got := At(recs, recs[0].Time.Add(-time.Hour)); got.Admitted[levee.Critical] != 1 {
			t.Errorf("At before the first record = %+v, want the first", got)
		}
	})
}
