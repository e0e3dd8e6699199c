package browsertest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/overload"
)

// The browser test loads the status page in headless Chromium against a
// controller under a scripted overload and checks the DOM: two snapshots at
// least 2 s apart differ, and each matches the JSON endpoint's sample of the
// same sequence number. It runs in real time (about 10 s).
//
// It skips when no Chromium is installed, unless LEVEE_REQUIRE_BROWSER=1
// (CI), which turns the skip into a failure. With LEVEE_STATUS_SCREENSHOT
// set to a PNG path it also runs 15 s of normal load then the overload
// (75 s in all, LEVEE_STATUS_SCREENSHOT_WAIT to change) and saves a
// screenshot taken with `chromium --screenshot`:
//
//	LEVEE_STATUS_SCREENSHOT=$PWD/docs/status-page.png go test -run TestStatusBrowser ./tools/browsertest

// statusChromium returns the path of a Chromium binary, or "" if none.
func statusChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// statusChromeFlags are the flags for a headless Chromium run as root with
// no network other than loopback.
func statusChromeFlags(userDataDir string) []string {
	return []string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync",
		"--no-default-browser-check", "--hide-scrollbars", "--disable-dev-shm-usage",
		"--user-data-dir=" + userDataDir,
	}
}

// statusPlant is a synthetic server: its "cpu" signal is the admitted rate
// over its capacity, smoothed, so the controller's shedding feeds back into
// the signal as it would on a real server.
type statusPlant struct {
	capacity float64 // requests per second at 100% cpu
	admitted atomic.Uint64
	cpu      atomic.Uint64 // float64 bits
}

func (p *statusPlant) Name() string    { return "cpu" }
func (p *statusPlant) Target() float64 { return 0.8 }
func (p *statusPlant) Value() float64  { return math.Float64frombits(p.cpu.Load()) }

// run samples the admitted rate every 100ms until ctx is done.
func (p *statusPlant) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var prev uint64
	var ewma float64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n := p.admitted.Load()
		ewma = 0.7*ewma + 0.3*float64(n-prev)/0.1
		prev = n
		p.cpu.Store(math.Float64bits(ewma / p.capacity))
	}
}

// statusOverload runs ctl and plant under a synthetic load until ctx is
// done: about 170 requests per second of every criticality in equal parts
// (70% of the plant's capacity of 250/s), then from onset on 500/s (twice
// its capacity), in process, no network, bounded in count.
func statusOverload(ctx context.Context, ctl *admit.Controller, plant *statusPlant, onset time.Duration) {
	go ctl.Run(ctx)
	go plant.run(ctx)
	go func() {
		start := time.Now()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 200_000; i++ { // bounded: at most 400 s
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if time.Since(start) < onset && i%3 != 0 {
				continue
			}
			c := levee.FromRank(i % levee.NumCriticalities)
			tk, err := ctl.Admit(levee.WithCriticality(ctx, c))
			if err == nil {
				plant.admitted.Add(1)
				tk.Done(nil)
			}
		}
	}()
}

// statusDOM is what the page shows, read from the DOM: data-value holds the
// exact number behind each formatted text.
type statusDOM struct {
	Seq      string                       `json:"seq"`
	State    string                       `json:"state"`
	Fields   map[string]string            `json:"fields"`
	Signals  map[string]map[string]string `json:"signals"`
	Crits    map[string]map[string]string `json:"crits"`
	Paths    int                          `json:"paths"`
	Rendered string                       `json:"rendered"`
	Samples  string                       `json:"samples"`
	// The overload manager's panel: its level, each resource's row and
	// each action's (WithStatusOverload).
	OverloadShown bool                         `json:"ovShown"`
	OverloadLevel string                       `json:"ovLevel"`
	Resources     map[string]map[string]string `json:"resources"`
	Actions       map[string]map[string]string `json:"actions"`
}

const statusReadDOM = `(() => {
  const q = s => document.querySelector(s);
  const rows = sel => {
    const out = {};
    document.querySelectorAll(sel).forEach(tr => {
      const o = {};
      tr.querySelectorAll('[data-field]').forEach(td => { o[td.dataset.field] = td.dataset.value; });
      out[tr.dataset.signal || tr.dataset.crit || tr.dataset.resource || tr.dataset.action] = o;
    });
    return out;
  };
  const fields = {};
  document.querySelectorAll('.card [data-field]').forEach(e => { fields[e.dataset.field] = e.dataset.value; });
  return {
    seq: q('#seq').dataset.value, state: q('#state').dataset.value, fields: fields,
    signals: rows('#signals tr[data-signal]'), crits: rows('#crit tr[data-crit]'),
    ovShown: !q('#overload').hidden, ovLevel: q('#ov-level').dataset.value,
    resources: rows('#ov-resources tr[data-resource]'), actions: rows('#ov-actions tr[data-action]'),
    paths: document.querySelectorAll('svg path').length,
    rendered: document.body.dataset.rendered || '',
    samples: document.body.dataset.samples || ''
  };
})()`

func TestStatusBrowser(t *testing.T) {
	chrome := statusChromium()
	if chrome == "" {
		if os.Getenv("LEVEE_REQUIRE_BROWSER") == "1" {
			t.Fatal("LEVEE_REQUIRE_BROWSER=1 but no chromium in PATH (apt-get install -y chromium)")
		}
		t.Skip("no chromium in PATH; set LEVEE_REQUIRE_BROWSER=1 to make this a failure")
	}
	shot := os.Getenv("LEVEE_STATUS_SCREENSHOT")

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	plant := &statusPlant{capacity: 250}
	ctl := admit.New(admit.WithSignals(plant))
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	onset := time.Second
	if shot != "" {
		onset = 15 * time.Second // a normal start, then the overload, in the charts
	}
	statusOverload(loadCtx, ctl, plant, onset)
	// An overload manager held at High by a scripted memory reading (one
	// step whose state lasts 30 s): its panel and the badge.
	om := overload.New(overload.WithPeriod(10*time.Second), overload.WithResources(
		overload.MemoryResource(func() overload.Reading {
			return overload.Reading{Value: 0.96, Used: 0.96 * (256 << 20), Limit: 256 << 20}
		})))
	om.Step(time.Now())
	st := leveehttp.StatusHandler(ctl, leveehttp.WithStatusTitle("levee status — synthetic overload"), leveehttp.WithStatusOverload(om))
	defer st.Stop()
	mux := http.NewServeMux()
	mux.Handle("/status", st)
	srv := httptest.NewServer(mux) // loopback only
	defer srv.Close()
	url := srv.URL + "/status"

	// A loaded CI machine may take a while to start a browser.
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(chrome), chromedp.WSURLReadTimeout(time.Minute)}
	for _, f := range statusChromeFlags(t.TempDir()) {
		name, val, hasVal := cutFlag(f)
		if hasVal {
			opts = append(opts, chromedp.Flag(name, val))
		} else {
			opts = append(opts, chromedp.Flag(name, true))
		}
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()

	var jsErrs atomic.Int64
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			jsErrs.Add(1)
			t.Logf("page exception: %s (line %d)", e.ExceptionDetails.Text, e.ExceptionDetails.LineNumber)
		}
	}); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}

	read := func() statusDOM {
		t.Helper()
		d, err := chromedp.Run(bctx, chromedp.Evaluate[statusDOM](statusReadDOM))
		if err != nil {
			t.Fatalf("reading the DOM: %v", err)
		}
		return d
	}
	// Wait for the page to have rendered a sample taken after the onset.
	if err := chromedp.Do(bctx,
		chromedp.Navigate(url),
		chromedp.Poll[chromedp.Void](`Number(document.body.dataset.rendered) >= 3`, chromedp.WithPollingTimeout(30*time.Second)),
	); err != nil {
		t.Fatalf("loading %s: %v", url, err)
	}
	first := read()
	firstAt := time.Now()
	// Real time by nature: the page refreshes once a second.
	time.Sleep(2 * time.Second)
	want := mustAtoi(t, first.Seq) + 2
	if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](fmt.Sprintf(`Number(document.querySelector('#seq').dataset.value) >= %d`, want), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("page did not update to sample %d: %v", want, err)
	}
	second := read()
	t.Logf("DOM snapshots %v apart: seq %s then %s", time.Since(firstAt).Round(time.Millisecond), first.Seq, second.Seq)

	doc := statusGetJSONURL(t, url+"?format=json")
	for _, d := range []statusDOM{first, second} {
		statusCompare(t, d, doc)
	}
	if first.Seq == second.Seq || first.Signals["cpu"]["value"] == second.Signals["cpu"]["value"] || first.Crits["SHEDDABLE"]["admitted"] == second.Crits["SHEDDABLE"]["admitted"] && first.Crits["SHEDDABLE"]["rejected"] == second.Crits["SHEDDABLE"]["rejected"] {
		t.Errorf("DOM did not change in %v: seq %s → %s, cpu %s → %s", time.Since(firstAt), first.Seq, second.Seq, first.Signals["cpu"]["value"], second.Signals["cpu"]["value"])
	}
	// The page keeps its own history, polling only for new samples: it
	// must hold every sample up to the one it shows.
	for _, d := range []statusDOM{first, second} {
		if d.Samples != d.Seq {
			t.Errorf("page holds %s samples at seq %s, want %s", d.Samples, d.Seq, d.Seq)
		}
	}
	if second.Paths < 4 {
		t.Errorf("%d SVG paths in the page, want the charts drawn (≥ 4)", second.Paths)
	}
	if n := jsErrs.Load(); n > 0 {
		t.Errorf("%d JavaScript exceptions in the page", n)
	}

	if shot != "" {
		statusScreenshot(t, ctx, chrome, url, shot)
	}
}

// statusCompare checks a DOM snapshot against the JSON sample with the same
// sequence number.
func statusCompare(t *testing.T, d statusDOM, doc statusDoc) {
	t.Helper()
	seq := uint64(mustAtoi(t, d.Seq))
	var s *statusDocItem
	for i := range doc.History {
		if doc.History[i].Seq == seq {
			s = &doc.History[i]
		}
	}
	if s == nil {
		t.Fatalf("sample %d shown by the page is not in the JSON history", seq)
	}
	if d.Rendered != d.Seq {
		t.Errorf("seq %s: body data-rendered %q", d.Seq, d.Rendered)
	}
	check := func(what, dom string, want *float64) {
		t.Helper()
		if want == nil {
			if dom != "" {
				t.Errorf("seq %d %s: DOM %q, JSON null", seq, what, dom)
			}
			return
		}
		got, err := strconv.ParseFloat(dom, 64)
		if err != nil || got != *want {
			t.Errorf("seq %d %s: DOM %q, JSON %v", seq, what, dom, *want)
		}
	}
	f := func(v float64) *float64 { return &v }
	check("load", d.Fields["load"], s.Load)
	check("shed_level", d.Fields["shed_level"], s.ShedLevel)
	check("admit_ratio", d.Fields["admit_ratio"], s.AdmitRatio)
	check("degrade_level", d.Fields["degrade_level"], f(float64(s.DegradeLevel)))
	check("capacity_rps", d.Fields["capacity_rps"], s.CapacityRPS)
	check("retry_ratio", d.Fields["retry_ratio"], s.RetryRatio)
	check("offered_rps", d.Fields["offered_rps"], s.OfferedRPS)
	check("shed_seconds", d.Fields["shed_seconds"], s.ShedSeconds)
	check("degraded_seconds", d.Fields["degraded_seconds"], s.DegradedSeconds)
	if len(d.Signals) != len(s.Signals) {
		t.Errorf("seq %d: %d signals in the DOM, %d in JSON", seq, len(d.Signals), len(s.Signals))
	}
	for _, sig := range s.Signals {
		row, ok := d.Signals[sig.Name]
		if !ok {
			t.Errorf("seq %d: signal %s missing from the DOM", seq, sig.Name)
			continue
		}
		check(sig.Name+" value", row["value"], sig.Value)
		check(sig.Name+" target", row["target"], sig.Target)
		check(sig.Name+" load", row["load"], sig.Load)
	}
	for _, c := range s.Criticalities {
		row, ok := d.Crits[c.Name]
		if !ok {
			t.Errorf("seq %d: criticality %s missing from the DOM", seq, c.Name)
			continue
		}
		check(c.Name+" admitted", row["admitted"], f(float64(c.Admitted)))
		check(c.Name+" rejected", row["rejected"], f(float64(c.Rejected)))
		check(c.Name+" admitted_rps", row["admitted_rps"], f(c.AdmittedRPS))
		check(c.Name+" rejected_rps", row["rejected_rps"], f(c.RejectedRPS))
		check(c.Name+" would_reject", row["would_reject"], f(float64(c.WouldReject)))
		check(c.Name+" would_reject_rps", row["would_reject_rps"], f(c.WouldRejectRPS))
	}
	state := "OK"
	switch {
	case s.Overloaded || (s.ShedLevel != nil && *s.ShedLevel > 0):
		state = "OVERLOADED"
	case s.DegradeLevel > 0:
		state = "DEGRADED"
	}
	if s.NoRetry {
		state += " · NO RETRY"
	}
	if s.DryRun {
		state += " · DRY RUN"
	}
	if ov := doc.Overload; ov != nil && ov.Level != "normal" {
		limit := "LIMIT " + strings.ToUpper(ov.Level)
		if state == "OK" {
			state = limit
		} else {
			state += " · " + limit
		}
	}
	if d.State != state {
		t.Errorf("seq %d: state %q in the DOM, want %q from JSON", seq, d.State, state)
	}
	statusCompareOverload(t, d, doc.Overload)
}

// statusCompareOverload checks the overload panel against the JSON's
// "overload".
func statusCompareOverload(t *testing.T, d statusDOM, ov *statusManager) {
	t.Helper()
	if d.OverloadShown != (ov != nil) {
		t.Fatalf("overload panel shown %v, JSON has the manager's state %v", d.OverloadShown, ov != nil)
	}
	if ov == nil {
		return
	}
	if d.OverloadLevel != ov.Level {
		t.Errorf("overload level %q in the DOM, %q in JSON", d.OverloadLevel, ov.Level)
	}
	if len(d.Resources) != len(ov.Resources) || len(d.Actions) != len(ov.Actions) {
		t.Errorf("overload panel: %d resources and %d actions, JSON %d and %d", len(d.Resources), len(d.Actions), len(ov.Resources), len(ov.Actions))
	}
	for _, r := range ov.Resources {
		row := d.Resources[r.Name]
		if row["level"] != r.Level || row["value"] != strconv.FormatFloat(r.Value, 'g', -1, 64) {
			t.Errorf("resource %s: DOM level %q value %q, JSON %q %v", r.Name, row["level"], row["value"], r.Level, r.Value)
		}
	}
	for _, a := range ov.Actions {
		if row := d.Actions[a.Action]; row["active"] != strconv.FormatBool(a.Active) {
			t.Errorf("action %s: DOM active %q, JSON %v", a.Action, row["active"], a.Active)
		}
	}
}

func statusGetJSONURL(t *testing.T, url string) statusDoc {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var doc statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return doc
}

// statusScreenshot lets the overload run long enough to fill the charts and
// saves a screenshot taken by `chromium --screenshot`.
func statusScreenshot(t *testing.T, ctx context.Context, chrome, url, path string) {
	wait := 75 * time.Second
	if v, err := time.ParseDuration(os.Getenv("LEVEE_STATUS_SCREENSHOT_WAIT")); err == nil {
		wait = v
	}
	t.Logf("running the overload for %v before the screenshot", wait)
	time.Sleep(wait)
	args := append(statusChromeFlags(t.TempDir()),
		"--screenshot="+path, "--window-size=1280,960", "--virtual-time-budget=3000", url)
	cmd := exec.CommandContext(ctx, chrome, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot: %v\n%s", err, out)
	}
	t.Logf("screenshot saved to %s", path)
}

func cutFlag(f string) (name, val string, hasVal bool) {
	f = f[2:]
	for i := range len(f) {
		if f[i] == '=' {
			return f[:i], f[i+1:], true
		}
	}
	return f, "", false
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("sequence number %q: %v", s, err)
	}
	return n
}

// statusDoc mirrors the status page's JSON document.
type statusDoc struct {
	IntervalSeconds float64        `json:"interval_s"`
	HistoryMax      int            `json:"history_max"`
	Current         *statusDocItem `json:"current"`
	History         []statusDocItem
	Overload        *statusManager `json:"overload"`
}

// statusManager is the part of overload.Status the panel shows.
type statusManager struct {
	Level     string `json:"level"`
	Resources []struct {
		Name  string  `json:"name"`
		Value float64 `json:"value"`
		Level string  `json:"level"`
	} `json:"resources"`
	Actions []struct {
		Action string `json:"action"`
		Active bool   `json:"active"`
	} `json:"actions"`
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
	DryRun          bool      `json:"dry_run"`
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
		// Dry-run counts, beside the live ones.
		WouldReject    uint64  `json:"would_reject"`
		WouldRejectRPS float64 `json:"would_reject_rps"`
	} `json:"criticalities"`
	RejectedByReason map[string]map[string]uint64 `json:"rejected_by_reason"`
}
