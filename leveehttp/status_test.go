package leveehttp

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// statusScript is a snapshot source whose state the test changes.
type statusScript struct {
	mu   sync.Mutex
	snap admit.Snapshot
}

func (s *statusScript) get() admit.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.snap
	out.Signals = append([]admit.SignalState(nil), s.snap.Signals...)
	return out
}

func (s *statusScript) set(f func(*admit.Snapshot)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.snap)
}

// statusDoc mirrors the JSON document for decoding in tests.
type statusDoc struct {
	IntervalSeconds float64        `json:"interval_s"`
	HistoryMax      int            `json:"history_max"`
	Current         *statusDocItem `json:"current"`
	History         []statusDocItem
}

type statusDocItem struct {
	Seq             uint64    `json:"seq"`
	Time            time.Time `json:"time"`
	Overloaded      bool      `json:"overloaded"`
	Load            *float64  `json:"load"`
	ShedLevel       *float64  `json:"shed_level"`
	AdmitRatio      *float64  `json:"admit_ratio"`
	DegradeLevel    int       `json:"degrade_level"`
	CapacityRPS     *float64  `json:"capacity_rps"`
	ShedSeconds     *float64  `json:"shed_seconds"`
	DegradedSeconds *float64  `json:"degraded_seconds"`
	RetryRatio      *float64  `json:"retry_ratio"`
	NoRetry         bool      `json:"no_retry"`
	OfferedRPS      *float64  `json:"offered_rps"`
	Signals         []struct {
		Name   string   `json:"name"`
		Value  *float64 `json:"value"`
		Target *float64 `json:"target"`
		Load   *float64 `json:"load"`
	} `json:"signals"`
	Criticalities []struct {
		Name        string  `json:"name"`
		Admitted    uint64  `json:"admitted"`
		Rejected    uint64  `json:"rejected"`
		AdmittedRPS float64 `json:"admitted_rps"`
		RejectedRPS float64 `json:"rejected_rps"`
	} `json:"criticalities"`
	RejectedByReason map[string]map[string]uint64 `json:"rejected_by_reason"`
}

func statusGetJSON(t *testing.T, h http.Handler, target string) statusDoc {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: status %d, want 200", target, rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q, want application/json", target, ct)
	}
	var doc statusDoc
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("GET %s: %v\n%s", target, err, rec.Body)
	}
	return doc
}

// TestStatusSampling runs the sampling goroutine on synctest's virtual
// clock: one sample per interval, a bounded history, rates from deltas,
// and no goroutine left after Stop.
func TestStatusSampling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := &statusScript{}
		src.set(func(s *admit.Snapshot) {
			s.Signals = []admit.SignalState{{Name: "cpu", Value: 0.5, Target: 0.8}}
		})
		st := newStatus(src.get, []StatusOption{WithStatusHistory(5)})
		defer st.Stop()
		for i := 1; i <= 7; i++ {
			src.set(func(s *admit.Snapshot) {
				s.Admitted[levee.Critical] += 10 // 10 per second
				s.Rejected[levee.Sheddable][levee.Overloaded] += 4
				s.ShedLevel = float64(i) / 2
			})
			time.Sleep(time.Second)
			synctest.Wait()
		}
		doc := statusGetJSON(t, st, "/status?format=json")
		if got, want := len(doc.History), 5; got != want {
			t.Fatalf("history length %d, want %d (bounded)", got, want)
		}
		for i, h := range doc.History {
			if want := uint64(4 + i); h.Seq != want {
				t.Errorf("history[%d].seq = %d, want %d (oldest first)", i, h.Seq, want)
			}
		}
		cur := doc.Current
		if cur == nil || cur.Seq != 8 {
			t.Fatalf("current = %+v, want seq 8", cur)
		}
		if got, want := *cur.ShedLevel, 3.5; got != want {
			t.Errorf("shed_level = %v, want %v", got, want)
		}
		rates := map[string][2]float64{}
		for _, c := range cur.Criticalities {
			rates[c.Name] = [2]float64{c.AdmittedRPS, c.RejectedRPS}
		}
		if got, want := rates["CRITICAL"], [2]float64{10, 0}; got != want {
			t.Errorf("CRITICAL rates = %v, want %v", got, want)
		}
		if got, want := rates["SHEDDABLE"], [2]float64{0, 4}; got != want {
			t.Errorf("SHEDDABLE rates = %v, want %v", got, want)
		}
		if got, want := doc.IntervalSeconds, 1.0; got != want {
			t.Errorf("interval_s = %v, want %v", got, want)
		}
		since := statusGetJSON(t, st, "/status?format=json&since=6")
		if got := statusSeqs2(since.History); len(got) != 2 || got[0] != 7 || got[1] != 8 {
			t.Errorf("since=6: history seqs %v, want [7 8]", got)
		}
		if since.Current == nil || since.Current.Seq != 8 {
			t.Errorf("since=6: current %+v, want seq 8", since.Current)
		}
		if got := statusGetJSON(t, st, "/status?format=json&since=8"); len(got.History) != 0 || got.Current.Seq != 8 {
			t.Errorf("since=8: %d samples and current %d, want none and 8", len(got.History), got.Current.Seq)
		}
		st.Stop()
		st.Stop() // idempotent
		time.Sleep(10 * time.Second)
		if got := statusGetJSON(t, st, "/status.json").Current.Seq; got != 8 {
			t.Errorf("after Stop: seq %d, want 8 (no more sampling)", got)
		}
	})
}

func TestStatusContextStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		st := newStatus((&statusScript{}).get, []StatusOption{WithStatusContext(ctx), WithStatusInterval(100 * time.Millisecond)})
		time.Sleep(time.Second)
		cancel()
		synctest.Wait()
		select {
		case <-st.done:
		default:
			t.Fatal("sampler still running after its context was cancelled")
		}
		if got, want := statusGetJSON(t, st, "/?format=json").Current.Seq, uint64(11); got != want {
			t.Errorf("seq = %d, want %d (one at start, then every 100ms for 1s)", got, want)
		}
	})
}

func TestStatusJSONValues(t *testing.T) {
	src := &statusScript{}
	src.set(func(s *admit.Snapshot) {
		s.Overloaded = true
		s.Load = 1.25
		s.ShedLevel = 1.3
		s.DegradeLevel = 2
		s.NoRetry = true
		s.Signals = []admit.SignalState{
			{Name: "cpu", Value: 1, Target: 0.8},
			{Name: "queue_delay", Value: math.NaN(), Target: 0.005},
		}
		s.Admitted[levee.CriticalPlus] = 3
		s.Rejected[levee.Critical][levee.Quota] = 2
		s.Rejected[levee.Critical][levee.Deadline] = 5
	})
	st := newStatus(src.get, nil)
	defer st.Stop()
	doc := statusGetJSON(t, st, "/debug/levee/status.json?history=0")
	if len(doc.History) != 0 {
		t.Errorf("history=0: %d samples, want none", len(doc.History))
	}
	cur := doc.Current
	if !cur.Overloaded || !cur.NoRetry || cur.DegradeLevel != 2 || *cur.Load != 1.25 {
		t.Errorf("current = %+v, want overloaded, no_retry, degrade 2, load 1.25", cur)
	}
	if got := len(cur.Signals); got != 2 {
		t.Fatalf("%d signals, want 2", got)
	}
	if s := cur.Signals[0]; s.Name != "cpu" || *s.Value != 1 || *s.Target != 0.8 || *s.Load != 1.25 {
		t.Errorf("cpu = %+v, want value 1 target 0.8 load 1.25", s)
	}
	if s := cur.Signals[1]; s.Value != nil || s.Load != nil {
		t.Errorf("queue_delay without a reading: value %v load %v, want null", s.Value, s.Load)
	}
	var names []string
	for _, c := range cur.Criticalities {
		names = append(names, c.Name)
	}
	if got, want := strings.Join(names, ","), "CRITICAL_PLUS,CRITICAL,SHEDDABLE_PLUS,SHEDDABLE"; got != want {
		t.Errorf("criticalities %s, want %s (most important first)", got, want)
	}
	if got := cur.Criticalities[1].Rejected; got != 7 {
		t.Errorf("CRITICAL rejected = %d, want 7", got)
	}
	if got := cur.RejectedByReason["CRITICAL"]["quota"]; got != 2 {
		t.Errorf("CRITICAL quota rejections = %d, want 2", got)
	}
}

func TestStatusPage(t *testing.T) {
	st := newStatus((&statusScript{}).get, []StatusOption{WithStatusTitle(`api <prod>`)})
	defer st.Stop()
	tests := []struct {
		method, target string
		wantCode       int
		wantType       string
	}{
		{http.MethodGet, "/status", 200, "text/html; charset=utf-8"},
		{http.MethodHead, "/status", 200, "text/html; charset=utf-8"},
		{http.MethodGet, "/status?format=json", 200, "application/json"},
		{http.MethodPost, "/status", 405, "text/plain; charset=utf-8"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		st.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.target, nil))
		if rec.Code != tt.wantCode || rec.Header().Get("Content-Type") != tt.wantType {
			t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.target, rec.Code, rec.Header().Get("Content-Type"), tt.wantCode, tt.wantType)
		}
	}
	rec := httptest.NewRecorder()
	st.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/status", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"<title>api &lt;prod&gt;</title>",
		`<script id="initial" type="application/json">{"interval_s":1,"history_max":300,"current":{"seq":1,`,
		"function chart(", // the script is inline
		".badge {",        // so is the style sheet
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// Everything is served by the handler: no external script, style,
	// image or font.
	for _, bad := range []string{"{{", `src="http`, `href="http`, "@import", "url(http"} {
		if strings.Contains(body, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q, want default-src 'none'", csp)
	}
	if got := rec.Header().Get("Content-Length"); got != "" && got != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %s, body %d bytes", got, len(body))
	}
}

func TestStatusRingOrder(t *testing.T) {
	src := &statusScript{}
	st := newStatus(src.get, []StatusOption{WithStatusHistory(3)})
	st.Stop()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 10 {
		st.sample(base.Add(time.Duration(i) * time.Second))
		st.mu.Lock()
		h := st.historyLocked(3)
		st.mu.Unlock()
		for j := 1; j < len(h); j++ {
			if h[j].seq != h[j-1].seq+1 {
				t.Fatalf("after %d samples: history seqs not consecutive: %v", i+2, statusSeqs(h))
			}
		}
		if last := h[len(h)-1].seq; last != uint64(i+2) {
			t.Fatalf("after %d samples: last seq %d", i+2, last)
		}
	}
}

func statusSeqs2(h []statusDocItem) []uint64 {
	var out []uint64
	for _, x := range h {
		out = append(out, x.Seq)
	}
	return out
}

func statusSeqs(h []statusSample) []uint64 {
	var out []uint64
	for _, x := range h {
		out = append(out, x.seq)
	}
	return out
}

func TestStatusHandlerNilPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("StatusHandler(nil) did not panic")
		}
	}()
	StatusHandler(nil)
}

func TestStatusHandlerController(t *testing.T) {
	ctl := admit.New()
	st := StatusHandler(ctl)
	defer st.Stop()
	if doc := statusGetJSON(t, st, "/?format=json"); doc.Current == nil {
		t.Error("no current sample")
	}
}
