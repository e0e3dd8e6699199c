package leveehttp

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"html"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/overload"
)

//go:embed status_assets/status.html status_assets/status.css status_assets/status.js
var statusAssets embed.FS

// Status defaults.
const (
	// DefaultStatusInterval is how often a Status handler samples the
	// controller.
	DefaultStatusInterval = time.Second
	// DefaultStatusHistory is how many samples a Status handler keeps:
	// five minutes at one per second.
	DefaultStatusHistory = 300
	// maxStatusHistory bounds the ring buffer whatever the option says.
	maxStatusHistory = 86400
)

// StatusOption configures a Status handler.
type StatusOption func(*statusConfig)

type statusConfig struct {
	interval time.Duration
	history  int
	ctx      context.Context
	title    string
	overload *overload.Manager
}

// WithStatusInterval sets how often the handler samples the controller
// (default DefaultStatusInterval, one second). Values below 10ms are raised
// to 10ms.
func WithStatusInterval(d time.Duration) StatusOption {
	return func(c *statusConfig) { c.interval = max(d, 10*time.Millisecond) }
}

// WithStatusHistory sets how many samples are kept for the charts and the
// JSON history (default DefaultStatusHistory, 300). It is clamped to
// 2..86400.
func WithStatusHistory(n int) StatusOption {
	return func(c *statusConfig) { c.history = min(max(n, 2), maxStatusHistory) }
}

// WithStatusContext stops the sampling goroutine when ctx is done, as Stop
// does. Default: only Stop stops it.
func WithStatusContext(ctx context.Context) StatusOption {
	return func(c *statusConfig) { c.ctx = ctx }
}

// WithStatusTitle sets the page title (default "levee status"). It is
// HTML-escaped.
func WithStatusTitle(t string) StatusOption {
	return func(c *statusConfig) { c.title = t }
}

// WithStatusOverload adds the overload manager m's state to the page and
// to its JSON, as "overload" (overload.Status: each resource against its
// limit and thresholds, each action's state, start and time active, the
// requests in flight, the cap, the refusals), read when the page or the
// JSON is served. Protect sets it while the manager is enabled. Default:
// none.
func WithStatusOverload(m *overload.Manager) StatusOption {
	return func(c *statusConfig) { c.overload = m }
}

// Status is an http.Handler serving a live status page for an
// admit.Controller: the current state, and charts of the last minutes of
// each signal against its target, the shed level and the rates admitted and
// rejected per criticality, refreshed every second. Everything (HTML, CSS,
// JavaScript, SVG charts) is served by the handler itself; nothing is
// loaded from elsewhere.
//
// The same data is served as JSON when the request has ?format=json or its
// path ends in ".json"; ?history=N limits the history to the last N samples
// (0: current state only) and ?since=SEQ to the samples after sequence
// number SEQ (the page polls with it, fetching about one sample a second).
//
// A goroutine samples the controller once per interval into a bounded ring
// buffer; it reads Controller.Snapshot and costs the accept path nothing.
// Call Stop (or cancel the context given with WithStatusContext) to end it.
// Mount the handler outside admission control so that it stays reachable
// under overload. A Status is safe for concurrent use.
type Status struct {
	snapshot func() admit.Snapshot
	cfg      statusConfig
	cancel   context.CancelFunc
	done     chan struct{}
	stop     sync.Once

	pageHead, pageTail []byte // the page around its initial JSON

	mu   sync.Mutex
	ring []statusSample // ring buffer, len ≤ cfg.history
	next int            // index of the next write once the ring is full
	seq  uint64         // samples taken so far
}

// StatusHandler returns a Status handler for ctl and starts its sampling
// goroutine, which takes a first sample at once. A nil ctl panics.
func StatusHandler(ctl *admit.Controller, opts ...StatusOption) *Status {
	if ctl == nil {
		panic("leveehttp: StatusHandler with a nil controller")
	}
	return newStatus(ctl.Snapshot, opts)
}

// newStatus takes the snapshot source as a function so that tests can feed
// scripted snapshots.
func newStatus(snapshot func() admit.Snapshot, opts []StatusOption) *Status {
	cfg := statusConfig{interval: DefaultStatusInterval, history: DefaultStatusHistory, ctx: context.Background(), title: "levee status"}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.ctx == nil {
		cfg.ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(cfg.ctx)
	s := &Status{
		snapshot: snapshot,
		cfg:      cfg,
		cancel:   cancel,
		done:     make(chan struct{}),
		ring:     make([]statusSample, 0, cfg.history),
	}
	s.pageHead, s.pageTail = statusPage(cfg)
	s.sample(time.Now())
	go s.run(ctx)
	return s
}

// Stop ends the sampling goroutine and waits for it to return. The handler
// keeps serving the history it has. Stop is idempotent.
func (s *Status) Stop() {
	s.stop.Do(s.cancel)
	<-s.done
}

func (s *Status) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.sample(now)
		}
	}
}

// statusSample is one sample of the controller's state.
type statusSample struct {
	seq       uint64
	at        time.Time // wall time of the sample
	snap      admit.Snapshot
	admRate   [levee.NumCriticalities]float64 // per second since the previous sample
	rejRate   [levee.NumCriticalities]float64
	wouldRate [levee.NumCriticalities]float64 // would-be rejections in dry-run
}

func (s *Status) sample(now time.Time) {
	snap := s.snapshot()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	cur := statusSample{seq: s.seq, at: now, snap: snap}
	if prev, ok := s.lastLocked(); ok {
		if dt := now.Sub(prev.at).Seconds(); dt > 0 {
			for c := range levee.NumCriticalities {
				cur.admRate[c] = rate(snap.Admitted[c], prev.snap.Admitted[c], dt)
				cur.rejRate[c] = rate(sumReasons(snap.Rejected[c]), sumReasons(prev.snap.Rejected[c]), dt)
				cur.wouldRate[c] = rate(sumReasons(snap.WouldReject[c]), sumReasons(prev.snap.WouldReject[c]), dt)
			}
		}
	}
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, cur)
		return
	}
	s.ring[s.next] = cur
	s.next = (s.next + 1) % len(s.ring)
}

func (s *Status) lastLocked() (statusSample, bool) {
	if len(s.ring) == 0 {
		return statusSample{}, false
	}
	i := len(s.ring) - 1
	if len(s.ring) == cap(s.ring) {
		i = (s.next + len(s.ring) - 1) % len(s.ring)
	}
	return s.ring[i], true
}

// historyLocked returns the last n samples, oldest first.
func (s *Status) historyLocked(n int) []statusSample {
	n = min(n, len(s.ring))
	out := make([]statusSample, 0, n)
	start := 0
	if len(s.ring) == cap(s.ring) {
		start = s.next
	}
	for i := len(s.ring) - n; i < len(s.ring); i++ {
		out = append(out, s.ring[(start+i)%len(s.ring)])
	}
	return out
}

func rate(cur, prev uint64, dt float64) float64 {
	if cur < prev {
		return 0
	}
	return float64(cur-prev) / dt
}

func sumReasons(r [levee.NumReasons]uint64) uint64 {
	var n uint64
	for _, v := range r {
		n += v
	}
	return n
}

// ServeHTTP serves the page, or its JSON (see Status).
func (s *Status) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q := r.URL.Query()
	n := s.cfg.history
	if h := q.Get("history"); h != "" {
		if v, err := strconv.Atoi(h); err == nil && v >= 0 {
			n = min(v, n)
		}
	}
	var since uint64
	if v, err := strconv.ParseUint(q.Get("since"), 10, 64); err == nil {
		since = v
	}
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if q.Get("format") == "json" || strings.HasSuffix(r.URL.Path, ".json") {
		body := s.json(n, since)
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method != http.MethodHead {
			w.Write(body)
		}
		return
	}
	// The page needs nothing from anywhere else: say so to the browser.
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src data:")
	h.Set("Content-Type", "text/html; charset=utf-8")
	body := s.json(s.cfg.history, 0)
	h.Set("Content-Length", strconv.Itoa(len(s.pageHead)+len(body)+len(s.pageTail)))
	if r.Method == http.MethodHead {
		return
	}
	w.Write(s.pageHead)
	w.Write(body)
	w.Write(s.pageTail)
}

// statusJSON is the JSON document: the latest sample and the history,
// oldest first (the latest sample is also the history's last).
type statusJSON struct {
	IntervalSeconds float64      `json:"interval_s"`
	HistoryMax      int          `json:"history_max"`
	Current         *sampleJSON  `json:"current"`
	History         []sampleJSON `json:"history"`
	// Overload is the overload manager's state now (WithStatusOverload).
	Overload *overload.Status `json:"overload,omitempty"`
}

type sampleJSON struct {
	Seq             uint64                       `json:"seq"`
	Time            time.Time                    `json:"time"`
	Overloaded      bool                         `json:"overloaded"`
	Load            jsonFloat                    `json:"load"`
	ShedLevel       jsonFloat                    `json:"shed_level"`
	AdmitRatio      jsonFloat                    `json:"admit_ratio"`
	DegradeLevel    int                          `json:"degrade_level"`
	CapacityRPS     jsonFloat                    `json:"capacity_rps"`
	ShedSeconds     jsonFloat                    `json:"shed_seconds"`
	DegradedSeconds jsonFloat                    `json:"degraded_seconds"`
	RetryRatio      jsonFloat                    `json:"retry_ratio"`
	NoRetry         bool                         `json:"no_retry"`
	RetryAfter      jsonFloat                    `json:"retry_after_s"`
	OfferedRPS      jsonFloat                    `json:"offered_rps"`
	ActiveTenants   int                          `json:"active_tenants"`
	FairShareRPS    jsonFloat                    `json:"fair_share_rps"`
	TenantShedRPS   jsonFloat                    `json:"tenant_shed_rps"`
	CallerGone      uint64                       `json:"caller_gone"`
	Downstream      uint64                       `json:"downstream_overloaded"`
	Signals         []signalJSON                 `json:"signals"`
	Criticalities   []critJSON                   `json:"criticalities"`
	Rejected        map[string]map[string]uint64 `json:"rejected_by_reason"`
	// DryRun: the controller computes its decisions and rejects nothing;
	// WouldReject counts what it would have rejected, beside Rejected.
	DryRun       bool                         `json:"dry_run"`
	WouldShedRPS jsonFloat                    `json:"would_shed_rps"`
	WouldReject  map[string]map[string]uint64 `json:"would_reject_by_reason"`
	ForcedShed   jsonFloat                    `json:"forced_shed_level"`
	OverloadShed jsonFloat                    `json:"overload_shed_level"`
}

type signalJSON struct {
	Name   string    `json:"name"`
	Value  jsonFloat `json:"value"`
	Target jsonFloat `json:"target"`
	Load   jsonFloat `json:"load"`
}

// critJSON is one criticality, most important first.
type critJSON struct {
	Name           string    `json:"name"`
	Admitted       uint64    `json:"admitted"`
	Rejected       uint64    `json:"rejected"`
	WouldReject    uint64    `json:"would_reject"`
	AdmittedRPS    jsonFloat `json:"admitted_rps"`
	RejectedRPS    jsonFloat `json:"rejected_rps"`
	WouldRejectRPS jsonFloat `json:"would_reject_rps"`
}

// jsonFloat encodes NaN and ±Inf (a signal without a reading) as null.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

func toJSON(x statusSample) sampleJSON {
	s := x.snap
	out := sampleJSON{
		Seq:             x.seq,
		Time:            x.at.UTC(),
		Overloaded:      s.Overloaded,
		Load:            jsonFloat(s.Load),
		ShedLevel:       jsonFloat(s.ShedLevel),
		AdmitRatio:      jsonFloat(s.AdmitFraction),
		DegradeLevel:    int(s.DegradeLevel),
		CapacityRPS:     jsonFloat(s.CapacityRPS),
		ShedSeconds:     jsonFloat(s.ShedSeconds),
		DegradedSeconds: jsonFloat(s.DegradedSeconds),
		RetryRatio:      jsonFloat(s.RetryShare),
		NoRetry:         s.NoRetry,
		RetryAfter:      jsonFloat(s.RetryAfter.Seconds()),
		OfferedRPS:      jsonFloat(s.OfferedRPS),
		ActiveTenants:   s.ActiveTenants,
		FairShareRPS:    jsonFloat(s.FairShareRPS),
		TenantShedRPS:   jsonFloat(s.TenantShedRPS),
		CallerGone:      s.CallerGone,
		Downstream:      s.DownstreamOverloaded,
		Signals:         make([]signalJSON, 0, len(s.Signals)),
		Criticalities:   make([]critJSON, 0, levee.NumCriticalities),
		Rejected:        make(map[string]map[string]uint64, levee.NumCriticalities),
		DryRun:          s.DryRun,
		WouldShedRPS:    jsonFloat(s.WouldShedRPS),
		WouldReject:     make(map[string]map[string]uint64, levee.NumCriticalities),
		ForcedShed:      jsonFloat(s.ForcedShed),
		OverloadShed:    jsonFloat(s.OverloadShed),
	}
	for _, sig := range s.Signals {
		out.Signals = append(out.Signals, signalJSON{sig.Name, jsonFloat(sig.Value), jsonFloat(sig.Target), jsonFloat(sig.Load())})
	}
	for r := levee.NumCriticalities - 1; r >= 0; r-- {
		c := levee.FromRank(r)
		out.Criticalities = append(out.Criticalities, critJSON{
			Name:           c.String(),
			Admitted:       s.Admitted[c],
			Rejected:       sumReasons(s.Rejected[c]),
			WouldReject:    sumReasons(s.WouldReject[c]),
			AdmittedRPS:    jsonFloat(x.admRate[c]),
			RejectedRPS:    jsonFloat(x.rejRate[c]),
			WouldRejectRPS: jsonFloat(x.wouldRate[c]),
		})
		by := make(map[string]uint64, levee.NumReasons-1)
		would := make(map[string]uint64, levee.NumReasons-1)
		for reason := 1; reason < levee.NumReasons; reason++ {
			by[levee.Reason(reason).String()] = s.Rejected[c][reason]
			would[levee.Reason(reason).String()] = s.WouldReject[c][reason]
		}
		out.Rejected[c.String()] = by
		out.WouldReject[c.String()] = would
	}
	return out
}

// json encodes the current sample and the last n samples of the history
// whose sequence number is above since.
func (s *Status) json(n int, since uint64) []byte {
	s.mu.Lock()
	hist := s.historyLocked(max(n, 1))
	s.mu.Unlock()
	doc := statusJSON{IntervalSeconds: s.cfg.interval.Seconds(), HistoryMax: s.cfg.history, History: make([]sampleJSON, 0, len(hist))}
	if m := s.cfg.overload; m != nil {
		st := m.Status()
		doc.Overload = &st
	}
	if len(hist) > 0 {
		cur := toJSON(hist[len(hist)-1])
		doc.Current = &cur
	}
	if n > 0 {
		for _, x := range hist {
			if x.seq > since {
				doc.History = append(doc.History, toJSON(x))
			}
		}
	}
	b, err := json.Marshal(doc) // escapes <, > and &: safe inside <script>
	if err != nil {
		return []byte(`{"error":"encoding failed"}`)
	}
	return b
}

// statusPage builds the page from the embedded assets: everything inline,
// split where the initial JSON goes.
func statusPage(cfg statusConfig) (head, tail []byte) {
	read := func(name string) string {
		b, err := statusAssets.ReadFile("status_assets/" + name)
		if err != nil {
			panic("leveehttp: missing embedded asset " + name) // a build defect, caught by the tests
		}
		return string(b)
	}
	page := strings.NewReplacer(
		"{{TITLE}}", html.EscapeString(cfg.title),
		"{{CSS}}", read("status.css"),
		"{{JS}}", read("status.js"),
	).Replace(read("status.html"))
	h, t, ok := bytes.Cut([]byte(page), []byte("{{INITIAL}}"))
	if !ok {
		panic("leveehttp: status.html has no {{INITIAL}} marker")
	}
	return h, t
}
